"""Reproducible degradations of a model's output track: the timeline's noise grid.

Real model audio is not clean TTS: it carries a noise floor, other voices, codec damage. The
grid measures how the VAD and segmentation hold up (tests/listen/test_degrade.py,
benchmarks/harness.py part ``noise``, docs/timeline.md section 4). Every condition is a pure
function of the input and a seed:

* ``white-L``: Gaussian white noise at L dBFS RMS over the whole track;
* ``babble-L``: ``BABBLE_TALKERS`` overlapping talkers (the bundled fixtures' user clips, each
  looped from a random point) summed and scaled to L dBFS RMS: speech-shaped, fluctuating
  noise, the hard case for a VAD because it *is* speech, only distant;
* ``codec``: a narrow-band telephone channel: 16 kHz -> 8 kHz (soxr), G.711 mu-law at 8 bits,
  back to 16 kHz, band-limited to 300-3400 Hz. Digital silence stays silent.

``clean`` leaves the track as it is. ``GRID`` is the benchmark's grid.
"""

from __future__ import annotations

import functools
import re

import numpy as np

SAMPLE_RATE = 16_000
LEVELS_DBFS = (-45, -35, -25)
GRID = ("clean", *(f"{kind}{level}" for kind in ("white", "babble") for level in LEVELS_DBFS),
        "codec")
BABBLE_TALKERS = 6
CODEC_BAND_HZ = (300.0, 3400.0)
CODEC_TRANSITION_HZ = 200.0
MU = 255.0

_CONDITION = re.compile(r"^(clean|codec|(white|babble)(-\d+(\.\d+)?))$")


def parse(condition: str) -> tuple[str, float | None]:
    """(kind, level in dBFS or None) of a condition name such as ``white-35``."""
    m = _CONDITION.match(condition)
    if not m:
        raise ValueError(f"unknown noise condition {condition!r}: expected clean, codec, "
                         "white-<dB> or babble-<dB> (e.g. white-35)")
    if m.group(2):
        return m.group(2), float(m.group(3))
    return m.group(1), None


def apply(condition: str, x: np.ndarray, seed: int = 0) -> np.ndarray:
    """``x`` (16 kHz mono float32) under ``condition``; a new array, clipped to [-1, 1]."""
    kind, level = parse(condition)
    x = np.asarray(x, dtype=np.float32)
    if kind == "clean":
        return x.copy()
    if kind == "codec":
        y = codec(x)
    else:
        noise = white(len(x), seed) if kind == "white" else babble(len(x), seed)
        y = x + scale_to(noise, level)
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def scale_to(noise: np.ndarray, level_dbfs: float) -> np.ndarray:
    rms = float(np.sqrt(np.mean(np.square(noise, dtype=np.float64)))) if len(noise) else 0.0
    if rms == 0.0:
        return noise.astype(np.float32)
    return (noise * (10 ** (level_dbfs / 20) / rms)).astype(np.float32)


def white(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _talkers() -> tuple[np.ndarray, ...]:
    """The bundled fixtures' user clips, trimmed of leading and trailing silence."""
    from ..data.instance import bundled_root, load_dataset
    from ..rules import requires

    out, seen = [], set()
    for inst in load_dataset(bundled_root(), requires=requires).instances:
        clip = inst.clips.get("user")
        if clip is None or clip.path in seen:
            continue
        seen.add(clip.path)
        a = clip.load()
        loud = np.flatnonzero(np.abs(a) > 1e-3)
        if len(loud):
            out.append(a[loud[0]: loud[-1] + 1].astype(np.float32))
    if not out:
        raise RuntimeError("babble noise needs the bundled fixtures' user clips; none found")
    return tuple(out)


def babble(n: int, seed: int, talkers: int = BABBLE_TALKERS) -> np.ndarray:
    """``talkers`` different user clips, each looped from a random point, summed."""
    pool = _talkers()
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype=np.float64)
    for i in rng.choice(len(pool), size=min(talkers, len(pool)), replace=False):
        clip = pool[int(i)]
        start = int(rng.integers(len(clip)))
        reps = -(-(n + start) // len(clip))
        out += np.tile(clip, reps)[start: start + n]
    return out.astype(np.float32)


def codec(x: np.ndarray) -> np.ndarray:
    """A telephone channel: 8 kHz, 8-bit mu-law, 300-3400 Hz."""
    import soxr

    narrow = soxr.resample(x.astype(np.float32), SAMPLE_RATE, 8000, quality="HQ")
    narrow = mu_law(narrow)
    wide = soxr.resample(narrow.astype(np.float32), 8000, SAMPLE_RATE, quality="HQ")
    wide = np.resize(wide, len(x)) if len(wide) != len(x) else wide
    return band_limit(wide, *CODEC_BAND_HZ)


def mu_law(x: np.ndarray, bits: int = 8) -> np.ndarray:
    """Compress, quantise to ``bits`` and expand (G.711's mu-law curve, mu = 255)."""
    x = np.clip(x.astype(np.float64), -1.0, 1.0)
    y = np.sign(x) * np.log1p(MU * np.abs(x)) / np.log1p(MU)
    q = 2 ** (bits - 1) - 1
    y = np.round(y * q) / q
    return (np.sign(y) * np.expm1(np.abs(y) * np.log1p(MU)) / MU).astype(np.float32)


def band_limit(x: np.ndarray, lo_hz: float, hi_hz: float,
               transition_hz: float = CODEC_TRANSITION_HZ) -> np.ndarray:
    """Zero-phase band-pass in the frequency domain with raised-cosine band edges
    ``transition_hz`` wide: a brick wall would ring for hundreds of ms (a sinc's 1/t tails)
    around every word, which no codec does."""
    spec = np.fft.rfft(x.astype(np.float64))
    f = np.fft.rfftfreq(len(x), 1 / SAMPLE_RATE)
    half = transition_hz / 2
    gain = np.ones_like(f)
    for edge, rising in ((lo_hz, True), (hi_hz, False)):
        t = np.clip((f - (edge - half)) / transition_hz, 0.0, 1.0)  # 0 below, 1 above the edge
        ramp = 0.5 - 0.5 * np.cos(np.pi * t)
        gain *= ramp if rising else 1.0 - ramp
    return np.fft.irfft(spec * gain, n=len(x)).astype(np.float32)
