"""FLM-Audio's model API as the bridge uses it (cofe-ai/flm-audio: ``flmaudio/models/loaders.py``
``get_mimi``, ``streaming_flmaudio.py`` ``LMGen``, ``FLMAudioForCausalLM.from_pretrained``),
with transparent behaviour:

* Mimi: 24 kHz, 12.5 frames/s; ``encode`` gives every codebook the code round(mean * SCALE)
  of the frame, ``decode`` gives a frame of constant value code / SCALE, and fails as the real
  one (an IndexError in its codebook lookup) on an id >= its ``cardinality`` (2048);
* ``LMGen``: ``max_delay`` = 1 as the real one (``step`` returns None at first); afterwards
  its audio codes are the input codes of the step before, and its text token is the
  checkpoint's ``script`` (config.json) at that step, 0 (padding) past its end.

Where the bridge meets FLM-Audio's own defects (cofe-ai/flm-audio@41d768c) the fake has them
too, so the bridge's workarounds are tested against them:

* the audio codes come from the depth transformer as in ``LMGen.depformer_step``: per
  channel, ``lm.forward_audio(transformer_output_states=..., audio_input_ids=...)`` (two
  arguments), whose real signature requires ``step`` and ``kv_cache`` as well and passes them
  on to a ``DepthGPT.forward`` that takes neither: a TypeError unpatched;
* the depth heads' logits peak at the echoed code, but at the audio pad id (2048) for the
  code ``PAD_TRIGGER``: nothing keeps the pad from reaching Mimi;
* ``reset_streaming`` zeroes the whole token cache, the initial tokens (text wait, audio pad)
  that streaming started with included; ``first_inputs`` records each trial's first input.

Both keep the streaming state rules of the real ``StreamingModule``: ``reset_streaming``
outside streaming raises, and ``LMGen.step`` outside streaming raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

from tests.bridges.model_stubs import SCALE

MIMI_NAME = "tokenizer-e351c8d8-checkpoint125.safetensors"
PAD = 2048  # the audio pad id; the depth heads' vocabulary holds it, Mimi's does not
AUDIO_VOCAB = PAD + 1
PAD_TRIGGER = 777  # the code whose echo the fake's depth heads replace by the pad id


class _Streaming:
    def __init__(self):
        self._streaming = False
        self.resets = 0

    def streaming_forever(self, batch_size: int) -> None:
        assert batch_size == 1
        self._streaming = True
        self._reset()

    def reset_streaming(self) -> None:
        if not self._streaming:
            raise ValueError("Trying to reset streaming, but it wasn't streaming.")
        self.resets += 1
        self._reset()

    def _reset(self) -> None:
        pass


class MimiModel(_Streaming):
    sample_rate = 24_000
    frame_rate = 12.5
    cardinality = 2048

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 3 and x.shape[:2] == (1, 1), x.shape
        frames = x.shape[-1] // 1920
        codes = torch.round(x[0, 0, :frames * 1920].reshape(frames, 1920).mean(-1) * SCALE)
        return codes.long().clamp(0, 2047).reshape(1, 1, frames).expand(1, 8, frames).clone()

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        assert codes.shape == (1, 8, 1), codes.shape
        if int(codes.max()) >= self.cardinality:  # the codebook's embedding lookup
            raise IndexError("index out of range in self")
        return torch.full((1, 1, 1920), float(codes[0, 0, 0]) / SCALE)


def get_mimi(mimi_path: str, device="cpu") -> MimiModel:
    if not (Path(mimi_path) / MIMI_NAME).exists():
        raise AssertionError("the real get_mimi would download the Mimi file here")
    return MimiModel()


class DepthGPT:
    """``depth_gpt.py``'s ``forward(main_hidden_states, audio_token_ids)``: logits for the
    channels so far and the next one, ``[B, k + 1, AUDIO_VOCAB]``. The fake's hidden state
    carries the codes to echo: channel c's logits peak at its code, or at the pad id when
    the code is ``PAD_TRIGGER``."""

    def __call__(self, main_hidden_states: torch.Tensor, audio_token_ids: torch.Tensor):
        batch, n = main_hidden_states.shape[0], audio_token_ids.shape[-1] + 1
        logits = torch.full((batch, n, AUDIO_VOCAB), -1.0)
        for c in range(n):
            code = int(main_hidden_states[0, c])
            logits[:, c, code] = 1.0
            if code == PAD_TRIGGER:
                logits[:, c, PAD] = 2.0
        return logits


class FLMAudioForCausalLM:
    def __init__(self, folder: str):
        cfg = json.loads((Path(folder) / "config.json").read_text())
        self.script = cfg["script"]
        self.config = SimpleNamespace(
            aud_channel=8, aud_vocab_size=AUDIO_VOCAB,
            mm_token_info=SimpleNamespace(text_wait_token_id=cfg["wait_id"],
                                          aud_pad_token_id=PAD))
        self.device = torch.device("cpu")
        self.aud_output_layers = DepthGPT()

    @classmethod
    def from_pretrained(cls, folder, *, device_map=None, torch_dtype=None,
                        low_cpu_mem_usage=False):
        return cls(folder)

    def forward_audio(self, transformer_output_states, audio_input_ids, step, kv_cache):
        # modeling_flmaudio.py:944, as it is: DepthGPT takes neither step nor kv_cache
        return self.aud_output_layers(transformer_output_states, audio_input_ids, step,
                                      kv_cache)

    def _get_initial_token(self) -> torch.Tensor:
        token = torch.full((1, 17, 1), PAD, dtype=torch.long)
        token[0, 0, 0] = self.config.mm_token_info.text_wait_token_id
        return token


class LMGen:
    def __init__(self, lm_model, *, use_sampling=True, temp_audio=0.5, temp_text=0.01,
                 top_k_audio=1, top_k_text=1, top_p_audio=0.9, top_p_text=0.9,
                 repetition_penalty_audio=1.2, repetition_penalty_text=1.03,
                 repetition_penalty_window_audio=50, repetition_penalty_window_text=50):
        self.lm_model = lm_model
        self.use_sampling, self.temp_audio, self.temp_text = use_sampling, temp_audio, temp_text
        self.top_k_audio, self.top_k_text = top_k_audio, top_k_text
        self.top_p_audio, self.top_p_text = top_p_audio, top_p_text
        self.repetition_penalty_audio = repetition_penalty_audio
        self.repetition_penalty_text = repetition_penalty_text
        self.repetition_penalty_window_audio = repetition_penalty_window_audio
        self.repetition_penalty_window_text = repetition_penalty_window_text
        self.max_delay = 1
        self._streaming_state: SimpleNamespace | None = None
        self.resets = 0
        self.seen_settings: list[tuple] = []
        self.first_inputs: list[list[int]] = []  # each trial's first input (17 token ids)

    def streaming_forever(self, batch_size: int) -> None:  # _init_streaming_state
        assert batch_size == 1
        cache = torch.zeros(1, 17, self.max_delay + 20, dtype=torch.long)
        cache[:, :, 0:1] = self.lm_model._get_initial_token()
        self._streaming_state = SimpleNamespace(cache=cache, offset=0, previous=None)

    def reset_streaming(self) -> None:
        state = self._streaming_state
        if state is None:
            raise ValueError("Trying to reset streaming, but it wasn't streaming.")
        self.resets += 1
        state.cache.zero_()  # _LMGenState.reset, the initial tokens included
        state.offset, state.previous = 0, None
        self.seen_settings.append((self.temp_text, self.top_k_audio))

    def step(self, input_tokens: torch.Tensor):
        state = self._streaming_state
        if state is None:
            raise RuntimeError("You should wrap those calls with a `with lm_gen.streaming(): ...`.")
        assert input_tokens.shape == (1, 8, 1), input_tokens.shape
        if state.offset == 0:
            self.first_inputs.append(state.cache[0, :, 0].tolist())
        hidden = (state.previous if state.previous is not None
                  else torch.zeros(1, 8, 1, dtype=torch.long))[:, :, 0].float()
        audio = self.depformer_step(hidden)
        state.previous = input_tokens.clone()
        state.offset += 1
        if state.offset <= self.max_delay:
            return None
        script = self.lm_model.script
        k = state.offset - 1
        out = torch.zeros(1, 9, 1, dtype=torch.long)
        out[0, 0, 0] = script[k] if k < len(script) else 0
        out[:, 1:, 0] = audio
        return out

    def depformer_step(self, last_hidden_states: torch.Tensor) -> torch.Tensor:
        decoded = torch.empty((1, 0), dtype=torch.long)
        for _ in range(self.lm_model.config.aud_channel):  # streaming_flmaudio.py:179
            logits = self.lm_model.forward_audio(transformer_output_states=last_hidden_states,
                                                 audio_input_ids=decoded)
            decoded = torch.cat([decoded, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return decoded
