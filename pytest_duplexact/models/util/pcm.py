"""16-bit little-endian PCM, the wire format of the hosted realtime APIs (OpenAI and its
dialects, Gemini Live): one encoding for every adapter."""

from __future__ import annotations

import numpy as np


def pcm16(samples: np.ndarray) -> bytes:
    x = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    return np.round(x * 32767.0).astype("<i2").tobytes()


def from_pcm16(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
