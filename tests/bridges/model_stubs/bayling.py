"""BayLing-Duplex's model API as the bridge uses it (BayLing-Models/BayLing-Duplex:
``bayling_duplex/duplex.py``), with the real signatures, state fields, event fields and stop
rule (``[EPAD]`` count against ``max_epad_count``, end-of-text), and transparent behaviour:

* ``tokenize_audio((wave, rate))``: one token per 80 ms of audio (at 16 kHz after resampling,
  as the real one), the code round(mean * SCALE) of that stretch; ``tokenize_calls`` records
  each call's length in tokens;
* ``stream_audio_tokens``: per block of ``x`` user tokens, ``y`` text events from the
  checkpoint's ``script`` (``[SILENCE]`` past its end), then one audio event whose tokens are
  the block's user tokens (an echo);
* ``stream_tokens_to_audio``: each token becomes ``samples_per_token`` samples (config.json;
  1764 = 80 ms at 22,050 Hz) of value token / SCALE; a call that is not final holds its last
  ``decoder.token_overlap_len`` (5) tokens back for the next call, whose first 5 are their
  overlap, as ``flow_inference.AudioDecoder.token2wav`` does with their mel (a caller that
  passes blocks without that overlap loses speech, here as there); ``decoder`` keeps
  per-stream caches, dropped by a final call. The cross-fade is an in-place write into a
  tensor made under ``torch.inference_mode`` (the flow's mel), as ``fade_in_out`` does on the
  CPU (``device``, this fake's only one): outside inference mode torch refuses it, as there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional

import numpy as np
import torch

from tests.bridges.model_stubs import SCALE
from tests.bridges.model_stubs.tokenizer import FakeTokenizer

SPECIALS = {"assistant": "<|assistant|>", "epad": "[EPAD]", "silence": "[SILENCE]",
            "pad": "[PAD]", "end": "<|endoftext|>"}


@dataclass
class DuplexStreamEvent:
    kind: str
    block_index: int
    token_id: Optional[int] = None
    text: Optional[str] = None
    audio_tokens: List[int] = field(default_factory=list)
    assistant_started: bool = False
    assistant_finished: bool = False
    stop_requested: bool = False


@dataclass
class DuplexStreamState:
    text_tokens: List[int] = field(default_factory=list)
    audio_tokens: List[int] = field(default_factory=list)
    user_audio_tokens: List[int] = field(default_factory=list)
    past_key_values: Any = None
    current_position: int = 0
    assistant_count: int = 0
    epad_count: int = 0
    block_index: int = 0
    completed_blocks: int = 0
    stop_requested: bool = False


class BayLingDuplex:
    sample_rate: int = 16000
    output_sample_rate: int = 22050

    def __init__(self, model_path, speech_tokenizer_path, decoder_path=None,
                 interleave_ratio: str = "10:5:10", device=None, torch_dtype="auto",
                 audio_vocab_size: int = 16384):
        x, y, z = (int(p) for p in interleave_ratio.split(":"))
        assert x == z
        self.x_ratio, self.y_ratio, self.z_ratio = x, y, z
        cfg = json.loads((Path(model_path) / "config.json").read_text())
        self.script = cfg["script"]
        self.out_spt = cfg.get("samples_per_token", 1764)
        self.device = torch.device(device or "cpu")  # the real one: cuda when available
        assert self.device.type == "cpu", "the fake runs on the CPU only"
        self.tokenizer = FakeTokenizer(model_path)
        ids = {k: self.tokenizer.convert_tokens_to_ids(v) for k, v in SPECIALS.items()}
        self.assistant_token_id, self.epad_token_id = ids["assistant"], ids["epad"]
        self.silence_token_id, self.end_token_id = ids["silence"], ids["end"]
        self._text_special_token_ids = set(ids.values())
        self.decoder = SimpleNamespace(mel_overlap_dict={}, hift_cache_dict={},
                                       token_overlap_len=5, calls=[]) \
            if decoder_path is not None else None
        self.tokenize_calls: list[int] = []

    def tokenize_audio(self, audio):
        wave, rate = audio
        x = wave[0].numpy()
        step = rate * 0.08  # 1280 samples at 16 kHz
        n = int(round(x.size / step))
        ids = [int(np.clip(round(float(x[int(i * step):int((i + 1) * step)].mean()) * SCALE),
                           0, 16383)) for i in range(n)]
        self.tokenize_calls.append(n)
        return ids, x.size / rate

    def create_stream_state(self) -> DuplexStreamState:
        return DuplexStreamState()

    def _decode_one_text_token(self, token_id: int) -> str:
        if token_id in self._text_special_token_ids:
            return ""
        return self.tokenizer.decode([token_id])

    def stream_audio_tokens(self, user_audio_tokens, state=None, temperature: float = 0.8,
                            top_p: float = 0.8, silence_penalty: float = 0.0,
                            max_epad_count: int = 1):
        if state is None:
            state = self.create_stream_state()
        if state.stop_requested:
            return
        assert not torch.is_grad_enabled()
        tokens = list(user_audio_tokens)
        for start in range(0, len(tokens) - self.x_ratio + 1, self.x_ratio):
            block = tokens[start:start + self.x_ratio]
            state.user_audio_tokens.extend(block)
            for _ in range(self.y_ratio):
                i = len(state.text_tokens)
                token_id = self.script[i] if i < len(self.script) else self.silence_token_id
                state.text_tokens.append(token_id)
                started = token_id == self.assistant_token_id
                finished = token_id == self.epad_token_id
                if started:
                    state.assistant_count += 1
                elif finished:
                    state.epad_count += 1
                    if state.epad_count >= max_epad_count:
                        state.stop_requested = True
                elif token_id == self.end_token_id:
                    state.stop_requested = True
                yield DuplexStreamEvent("text", state.block_index, token_id=token_id,
                                        text=self._decode_one_text_token(token_id),
                                        assistant_started=started, assistant_finished=finished,
                                        stop_requested=state.stop_requested)
            state.audio_tokens.extend(block)
            yield DuplexStreamEvent("audio", state.block_index, audio_tokens=list(block),
                                    stop_requested=state.stop_requested)
            state.block_index += 1
            state.completed_blocks += 1
            if state.stop_requested:
                break

    def stream_tokens_to_audio(self, audio_tokens, stream_id: str, finalize: bool = False):
        if self.decoder is None:
            raise RuntimeError("Audio decoder is not loaded. Pass decoder_path when "
                               "constructing the model.")
        tokens = list(audio_tokens)
        if not tokens:
            return torch.zeros(1, 0)
        # AudioDecoder.token2wav: a call that is not final holds its last token_overlap_len
        # tokens back and cross-fades them into the first as many of the next call (here:
        # the next call's are played instead); a final call plays everything, drops the caches
        d = self.decoder
        with torch.inference_mode():  # flow.py's inference is decorated so
            mel = torch.tensor(tokens, dtype=torch.float32)[None, None]
        if d.mel_overlap_dict.get(stream_id) is not None:
            # fade_in_out (flow_inference.py:14) on the CPU: ``.cpu()`` is the same tensor,
            # written in place (torch raises outside inference mode)
            mel[..., :1] = mel[..., :1] * 1.0
        keep = 0 if finalize else d.token_overlap_len
        said = tokens[:len(tokens) - keep]
        if finalize:
            d.mel_overlap_dict.pop(stream_id, None)
            d.hift_cache_dict.pop(stream_id, None)
        else:
            d.mel_overlap_dict[stream_id] = d.hift_cache_dict[stream_id] = tokens[-keep:]
        d.calls.append((len(tokens), finalize))
        pcm = np.repeat(np.asarray(said, dtype=np.float32) / SCALE, self.out_spt)
        return torch.from_numpy(pcm[None])
