"""Audio I/O and resampling. soundfile reads and writes; soxr resamples (a real band-limited
resampler, never linear interpolation)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from .atomic import write_bytes
from .recording import SAMPLE_RATE  # the benchmark's input rate (SPEC §2)


class AudioFormatError(ValueError):
    pass


def info(path: Path) -> tuple[int, int, int]:
    """(sample_rate, channels, frames) from the header only."""
    i = sf.info(str(path))
    return i.samplerate, i.channels, i.frames


def read(path: Path, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Mono float32 samples at ``sample_rate``; a file at another rate or with other than one
    channel is an error here (datasets declare 16 kHz mono), not silently converted."""
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError) as e:  # corrupt body, lost sync, I/O
        raise AudioFormatError(f"{path}: cannot be decoded: {e}") from None
    if data.shape[1] != 1:
        raise AudioFormatError(f"{path}: {data.shape[1]} channels, expected mono")
    if sr != sample_rate:
        raise AudioFormatError(f"{path}: sample rate {sr} Hz, expected {sample_rate} Hz")
    return data[:, 0]


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float -> PCM-16 in numpy exactly as libsndfile 1.2 converts for WAV (floor of
    x * 32768, clipped; byte-identical files) at a fifth of its cost."""
    x = np.asarray(samples, dtype=np.float32)
    return np.clip(np.floor(x * np.float32(32768)), -32768, 32767).astype(np.int16)


def write(path: Path, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """Write mono audio; the format follows the suffix (.wav = PCM_16, .flac = FLAC 16-bit).
    Float samples are converted to 16 bits (``to_pcm16`` for WAV, libsndfile's own for FLAC);
    int16 samples are written as they are, so WAV and FLAC then hold the same samples.

    Encoded in memory, then written to a temporary name and renamed, so a reader never sees
    half a file, and a full disk is an OSError naming the file (libsndfile writing it itself
    says only "System error.")."""
    path = Path(path)
    fmt = "FLAC" if path.suffix.lower() == ".flac" else "WAV"
    data = np.asarray(samples)
    if data.dtype != np.int16:
        data = data.astype(np.float32, copy=False)
        if fmt == "WAV":  # every instance writes two recordings (benchmarks/harness_performance.py)
            data = to_pcm16(data)
    buf = io.BytesIO()
    try:  # FLAC at its highest (still lossless) compression; soundfile < 0.13 lacks it
        extra = {"compression_level": 1.0} if fmt == "FLAC" else {}
        sf.write(buf, data, sample_rate, format=fmt, subtype="PCM_16", **extra)
    except TypeError:
        buf = io.BytesIO()
        sf.write(buf, data, sample_rate, format=fmt, subtype="PCM_16")
    write_bytes(path, buf.getvalue())


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    if from_rate == to_rate:
        return np.asarray(samples, dtype=np.float32)
    return soxr.resample(np.asarray(samples, dtype=np.float32), from_rate, to_rate, quality="HQ")


def silence(seconds: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    return np.zeros(int(round(seconds * sample_rate)), dtype=np.float32)
