"""Stands in for torchaudio, which has no build for this CPU torch. Freeze-Omni's server uses
only ``compliance.kaldi.fbank`` (web/vad.py), whose features go to the (stubbed) speech LLM
alone; VITA-1.5's uses ``save`` (the user's turn to a WAV file), ``load`` (that file, for the
stubbed feature extractor) and ``fbank``; silero-vad imports it and uses nothing of it while
serving. ``load`` and ``save`` are 16-bit PCM WAV through the standard library."""

from __future__ import annotations

import wave

import numpy as np
import torch

from . import compliance  # noqa: F401  (torchaudio.compliance.kaldi, as the real package)


def save(path, tensor, sample_rate, **_):
    x = np.asarray(torch.as_tensor(tensor).detach().cpu().float().reshape(-1).numpy())
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(np.round(np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


def load(path, **_):
    with wave.open(str(path), "rb") as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
        return torch.from_numpy(x.copy()).unsqueeze(0), w.getframerate()
