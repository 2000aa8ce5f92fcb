"""WAV encoding of model audio for the remote audio judge and transcriber."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from ..data import audio as audio_io


def wav_bytes(samples: np.ndarray, sample_rate: int, min_seconds: float = 0.0) -> bytes:
    """16-bit PCM mono WAV at the benchmark rate, padded with trailing silence to
    ``min_seconds``. Identical samples give identical bytes (cache keys depend on them)."""
    samples = audio_io.resample(np.asarray(samples, dtype=np.float32).reshape(-1), sample_rate,
                                audio_io.SAMPLE_RATE)
    short = int(round(min_seconds * audio_io.SAMPLE_RATE)) - len(samples)
    if short > 0:
        samples = np.concatenate([samples, np.zeros(short, dtype=np.float32)])
    buf = io.BytesIO()
    sf.write(buf, samples, audio_io.SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()
