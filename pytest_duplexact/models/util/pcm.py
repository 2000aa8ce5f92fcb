"""16-bit little-endian PCM (and 32-bit float), the wire formats of the hosted realtime APIs
(OpenAI and its dialects, Gemini Live, vLLM-Omni, the socket.io demos): one codec for every
adapter, on the streaming hot path (each session calls it 50 times a second), so each
conversion is a few whole-array numpy operations and no more."""

from __future__ import annotations

import base64

import numpy as np

FORMATS = ("pcm16", "pcm_f32le")  # the names the OpenAI-style protocols give them
_I16 = np.dtype("<i2")


def pcm16_array(samples: np.ndarray) -> np.ndarray:
    """float32 in [-1, 1] (clipped) -> int16 LE samples, rounded half to even: ``pcm16``
    before its bytes, for a caller that converts a whole stretch once and sends it in
    slices (each slice's ``pcm16`` is then its bytes, no arithmetic)."""
    x = np.asarray(samples)
    if x.dtype == _I16:
        return x
    x = np.multiply(x.astype(np.float32, copy=False), np.float32(32767.0))
    np.minimum(x, 32767.0, out=x)  # the clip, as ufuncs: np.clip's dispatch costs more
    np.maximum(x, -32767.0, out=x)
    np.rint(x, out=x)
    return x.astype(_I16)


def pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] (clipped) -> int16 LE bytes, rounded half to even; int16 samples
    (``pcm16_array``'s) are already that, and give their bytes as they are."""
    return pcm16_array(samples).tobytes()


def from_pcm16(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def pcm_f32le(samples: np.ndarray) -> bytes:
    """float32 clipped to [-1, 1] -> float32 LE bytes."""
    x = np.asarray(samples, dtype="<f4")
    return np.clip(x, -1.0, 1.0).tobytes()


def b64_pcm(samples: np.ndarray, fmt: str = "pcm16") -> str:
    """``samples`` in ``fmt`` (``FORMATS``) as base64 text, for a JSON message."""
    raw = pcm16(samples) if fmt == "pcm16" else pcm_f32le(samples)
    return base64.b64encode(raw).decode("ascii")


def from_b64_pcm16(data: str) -> np.ndarray:
    return from_pcm16(base64.b64decode(data))
