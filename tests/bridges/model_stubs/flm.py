"""FLM-Audio's model API as the bridge uses it (cofe-ai/flm-audio: ``flmaudio/models/loaders.py``
``get_mimi``, ``streaming_flmaudio.py`` ``LMGen``, ``FLMAudioForCausalLM.from_pretrained``),
with transparent behaviour:

* Mimi: 24 kHz, 12.5 frames/s; ``encode`` gives every codebook the code round(mean * SCALE)
  of the frame, ``decode`` gives a frame of constant value code / SCALE;
* ``LMGen``: ``max_delay`` = 1 as the real one (``step`` returns None at first); afterwards
  its audio codes are the input codes of the step before, and its text token is the
  checkpoint's ``script`` (config.json) at that step, 0 (padding) past its end.

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

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 3 and x.shape[:2] == (1, 1), x.shape
        frames = x.shape[-1] // 1920
        codes = torch.round(x[0, 0, :frames * 1920].reshape(frames, 1920).mean(-1) * SCALE)
        return codes.long().clamp(0, 2047).reshape(1, 1, frames).expand(1, 8, frames).clone()

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        assert codes.shape == (1, 8, 1), codes.shape
        return torch.full((1, 1, 1920), float(codes[0, 0, 0]) / SCALE)


def get_mimi(mimi_path: str, device="cpu") -> MimiModel:
    if not (Path(mimi_path) / MIMI_NAME).exists():
        raise AssertionError("the real get_mimi would download the Mimi file here")
    return MimiModel()


class FLMAudioForCausalLM:
    def __init__(self, folder: str):
        cfg = json.loads((Path(folder) / "config.json").read_text())
        self.script = cfg["script"]
        self.config = SimpleNamespace(
            aud_channel=8, mm_token_info=SimpleNamespace(text_wait_token_id=cfg["wait_id"]))
        self.device = torch.device("cpu")

    @classmethod
    def from_pretrained(cls, folder, *, device_map=None, torch_dtype=None,
                        low_cpu_mem_usage=False):
        return cls(folder)


class LMGen(_Streaming):
    def __init__(self, lm_model, *, use_sampling=True, temp_audio=0.5, temp_text=0.01,
                 top_k_audio=1, top_k_text=1, top_p_audio=0.9, top_p_text=0.9,
                 repetition_penalty_audio=1.2, repetition_penalty_text=1.03,
                 repetition_penalty_window_audio=50, repetition_penalty_window_text=50):
        super().__init__()
        self.lm_model = lm_model
        self.use_sampling, self.temp_audio, self.temp_text = use_sampling, temp_audio, temp_text
        self.top_k_audio, self.top_k_text = top_k_audio, top_k_text
        self.top_p_audio, self.top_p_text = top_p_audio, top_p_text
        self.repetition_penalty_audio = repetition_penalty_audio
        self.repetition_penalty_text = repetition_penalty_text
        self.repetition_penalty_window_audio = repetition_penalty_window_audio
        self.repetition_penalty_window_text = repetition_penalty_window_text
        self.max_delay = 1
        self.seen_settings: list[tuple] = []

    def _reset(self) -> None:
        self.offset = 0
        self.previous = None
        self.seen_settings.append((self.temp_text, self.top_k_audio))

    def step(self, input_tokens: torch.Tensor):
        if not self._streaming:
            raise RuntimeError("You should wrap those calls with a `with lm_gen.streaming(): ...`.")
        assert input_tokens.shape == (1, 8, 1), input_tokens.shape
        previous, self.previous = self.previous, input_tokens.clone()
        self.offset += 1
        if self.offset <= self.max_delay:
            return None
        script = self.lm_model.script
        k = self.offset - 1
        text = script[k] if k < len(script) else 0
        out = torch.zeros(1, 9, 1, dtype=torch.long)
        out[0, 0, 0] = text
        out[:, 1:] = previous
        return out
