"""Render one phrase with Debian's espeak-ng and make it placeable.

A rendered phrase is 16 kHz mono float32, trimmed so its first and last samples are speech (an
energy threshold), with espeak's own clause pauses capped so the only long silences in a clip
are the ones the generator places, at a fixed active speech level.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from functools import lru_cache

import numpy as np
import soundfile as sf

from ..data import audio

SR = audio.SAMPLE_RATE
SPEECH_LEVEL_DBFS = -26.0  # active speech level of every phrase (ITU-T P.56 nominal level)
TRIM_DB = -55.0  # a 5 ms window is speech when its energy is within 55 dB of the loudest
ACTIVE_DB = -40.0  # windows within 40 dB of the loudest count towards the speech level
MAX_INNER_SILENCE_S = 0.15  # espeak's comma / clause pauses are shortened to this
_WINDOW = int(0.005 * SR)


class TTSError(RuntimeError):
    pass


def available() -> bool:
    return shutil.which("espeak-ng") is not None


@lru_cache(maxsize=1)
def version() -> str:
    """``espeak-ng 1.51`` (recorded in dataset.json: another version renders other bytes)."""
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True)
    words = out.stdout.split()
    return f"espeak-ng {words[words.index('text-to-speech:') + 1]}" if \
        "text-to-speech:" in words else out.stdout.strip()


@lru_cache(maxsize=None)
def render(text: str, voice: str, speed: int) -> np.ndarray:
    """The phrase as 16 kHz speech: trimmed, inner pauses capped, at SPEECH_LEVEL_DBFS.

    Cached: a talk's lead-in and reference are shared by several instances."""
    raw, rate = _espeak(text, voice, speed)
    x = audio.resample(raw, rate, SR)
    x = trim(cap_silences(x))
    if x.size == 0:
        raise TTSError(f"espeak-ng rendered no audible speech for {text!r} ({voice})")
    x = normalize(x)
    x.setflags(write=False)
    return x


def _espeak(text: str, voice: str, speed: int) -> tuple[np.ndarray, int]:
    if not available():
        raise TTSError("espeak-ng is not installed (Debian/Ubuntu: apt-get install espeak-ng)")
    # Text on stdin, never argv: a phrase starting with '-' must not read as an option.
    cmd = ["espeak-ng", "-v", voice, "-s", str(speed), "-z", "--stdout", "--stdin"]
    done = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True)
    if done.returncode != 0 or not done.stdout:
        raise TTSError(f"{' '.join(cmd)} failed for {text!r}: "
                       f"{done.stderr.decode(errors='replace').strip()}")
    data, rate = sf.read(io.BytesIO(done.stdout), dtype="float32", always_2d=True)
    return data[:, 0], rate


def energy(x: np.ndarray) -> np.ndarray:
    """Mean square over a centred 5 ms window, one value per sample."""
    return np.convolve(np.asarray(x, np.float64) ** 2, np.ones(_WINDOW) / _WINDOW, mode="same")


def speech_mask(x: np.ndarray, db: float = TRIM_DB) -> np.ndarray:
    e = energy(x)
    peak = e.max() if e.size else 0.0
    return e > peak * 10 ** (db / 10) if peak > 0 else np.zeros(x.size, bool)


def trim(x: np.ndarray) -> np.ndarray:
    """Cut leading and trailing silence: keep from the first to the last speech sample."""
    idx = np.flatnonzero(speech_mask(x))
    return x[idx[0]: idx[-1] + 1] if idx.size else x[:0]


def silent_runs(x: np.ndarray, min_seconds: float) -> list[tuple[int, int]]:
    """[start, end) sample ranges of silence lasting at least ``min_seconds``."""
    quiet = ~speech_mask(x)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], quiet.astype(np.int8), [0]))))
    runs = zip(edges[::2], edges[1::2])
    return [(int(a), int(b)) for a, b in runs if b - a >= min_seconds * SR]


def cap_silences(x: np.ndarray, limit: float = MAX_INNER_SILENCE_S) -> np.ndarray:
    """Shorten every silence longer than ``limit`` to exactly ``limit`` by cutting its middle
    (espeak's silence is near zero, so the cut is inaudible)."""
    keep = int(limit * SR)
    parts, pos = [], 0
    for a, b in silent_runs(x, limit):
        if a == 0 or b == x.size:
            continue  # leading / trailing silence: trim() removes it
        cut_from = a + keep // 2
        parts.append(x[pos:cut_from])
        pos = b - (keep - keep // 2)
    parts.append(x[pos:])
    return np.concatenate(parts)


def level_dbfs(x: np.ndarray) -> float:
    """Active speech level: RMS over the windows within ACTIVE_DB of the loudest."""
    e = energy(x)
    active = e[e > e.max() * 10 ** (ACTIVE_DB / 10)]
    return 10 * np.log10(active.mean())


def normalize(x: np.ndarray, target_dbfs: float = SPEECH_LEVEL_DBFS) -> np.ndarray:
    return (x * 10 ** ((target_dbfs - level_dbfs(x)) / 20)).astype(np.float32)
