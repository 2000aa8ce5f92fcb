"""Reproducible degradations of a model's output track: the timeline's noise grid.

Real model audio is not clean TTS: it carries a noise floor, other voices, codec damage. The
grid measures how the VAD and segmentation hold up (tests/listen/test_degrade.py,
benchmarks/harness_performance.py part ``noise``, docs/timeline.md §4). Every condition is a pure
function of the input and a seed:

* ``white-L``: Gaussian white noise at L dBFS RMS over the whole track;
* ``babble-L``: ``BABBLE_TALKERS`` overlapping talkers (the bundled fixtures' user clips, each
  looped from a random point) summed and scaled to L dBFS RMS: speech-shaped, fluctuating
  noise, the hard case for a VAD because it *is* speech, only distant;
* ``codec``: a narrow-band telephone channel: 16 kHz -> 8 kHz (soxr), G.711 mu-law at 8 bits,
  back to 16 kHz, band-limited to 300-3400 Hz. Digital silence stays silent.

What real model output carries that clean TTS does not (each far below the speech, and none
of it speech):

* ``breath-L``: a breath (band-passed noise, a rise and fall 0.25-0.4 s long) at L dBFS RMS in
  every pause, ending 0.1-0.2 s before the next phrase;
* ``murmur-L``: one quiet second voice (a bundled user clip, looped) at L dBFS RMS over the
  whole track;
* ``hum-L``: 50 Hz mains hum and its harmonics at L dBFS RMS over the whole track;
* ``reverb``: a room (an exponentially decaying noise response, RT60 ``REVERB_RT60_S``, its
  energy ``REVERB_DRR_DB`` under the direct sound): every phrase trails a decaying tail;
* ``click``: what a model emits as generation starts: a click and a burst of codec noise at
  ``CLICK_NOISE_DBFS`` 0.15-0.4 s before every phrase that follows a pause;
* ``opus``: an Opus round trip at 24 kHz (sphn, the codec stepped models' audio travels
  through), realigned to the input.

``clean`` leaves the track as it is. ``GRID`` is the benchmark's grid.
"""

from __future__ import annotations

import functools
import re

import numpy as np

SAMPLE_RATE = 16_000
LEVELS_DBFS = (-45, -35, -25)
GRID = ("clean", *(f"{kind}{level}" for kind in ("white", "babble") for level in LEVELS_DBFS),
        "codec", "breath-50", "murmur-48", "murmur-56", "hum-50", "reverb", "click", "opus")
BABBLE_TALKERS = 6
CODEC_BAND_HZ = (300.0, 3400.0)
CODEC_TRANSITION_HZ = 200.0
MU = 255.0

REVERB_RT60_S = 0.4
REVERB_DRR_DB = 10.0
CLICK_NOISE_DBFS = -51.0
PAUSE_S = 0.35  # a stretch of digital silence at least this long is a pause between phrases
_LEVELLED = ("white", "babble", "breath", "murmur", "hum")
_FIXED = ("clean", "codec", "reverb", "click", "opus")

_CONDITION = re.compile(rf"^({'|'.join(_FIXED)}|({'|'.join(_LEVELLED)})(-\d+(\.\d+)?))$")


def parse(condition: str) -> tuple[str, float | None]:
    """(kind, level in dBFS or None) of a condition name such as ``white-35``."""
    m = _CONDITION.match(condition)
    if not m:
        raise ValueError(f"unknown noise condition {condition!r}: expected one of "
                         f"{', '.join(_FIXED)} or <kind>-<dB> with kind one of "
                         f"{', '.join(_LEVELLED)} (e.g. white-35)")
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
    elif kind == "opus":
        y = opus(x)
    elif kind == "reverb":
        y = reverb(x, seed)
    elif kind == "breath":
        y = x + breaths(x, level, seed)
    elif kind == "click":
        y = x + clicks(x, seed)
    else:
        noise = {"white": white, "babble": babble, "murmur": murmur, "hum": hum}[kind](len(x), seed)
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


def murmur(n: int, seed: int) -> np.ndarray:
    """One other voice: a single user clip, looped from a random point."""
    return babble(n, seed, talkers=1)


def hum(n: int, seed: int) -> np.ndarray:
    """50 Hz mains hum: the fundamental and harmonics 2-6 at 1/k amplitude, random phases."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SAMPLE_RATE
    return sum(np.sin(2 * np.pi * 50 * k * t + rng.uniform(0, 2 * np.pi)) / k
               for k in range(1, 7)).astype(np.float32)


def pauses(x: np.ndarray, min_s: float = PAUSE_S) -> list[tuple[int, int]]:
    """Stretches of digital silence (every 10 ms frame under -80 dBFS) at least ``min_s`` long
    that end in sound: the pauses before phrases, in samples."""
    hop = SAMPLE_RATE // 100
    n = len(x) // hop
    if n == 0:
        return []
    power = np.mean(np.square(x[: n * hop].reshape(n, hop), dtype=np.float64), axis=1)
    quiet = np.concatenate([[False], power < 1e-8, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    out = []
    for a, b in zip(edges[::2], edges[1::2]):  # quiet frames [a, b)
        if b < n and (b - a) * hop >= min_s * SAMPLE_RATE:
            out.append((a * hop, b * hop))
    return out


def breaths(x: np.ndarray, level_dbfs: float, seed: int) -> np.ndarray:
    """A breath in every pause of ``x``: noise band-passed to 400-4000 Hz under a Hann rise and
    fall 0.25-0.4 s long, at ``level_dbfs`` RMS over its length, ending 0.1-0.2 s before the
    next phrase (shortened to fit the pause)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(x), np.float32)
    for a, b in pauses(x):
        end = b - int(rng.uniform(0.1, 0.2) * SAMPLE_RATE)
        start = max(a + int(0.05 * SAMPLE_RATE), end - int(rng.uniform(0.25, 0.4) * SAMPLE_RATE))
        if end - start < int(0.1 * SAMPLE_RATE):
            continue
        noise = band_limit(rng.standard_normal(end - start).astype(np.float32), 400.0, 4000.0)
        out[start:end] = scale_to(noise * np.hanning(end - start), level_dbfs)
    return out


def clicks(x: np.ndarray, seed: int) -> np.ndarray:
    """Before every phrase that follows a pause, 0.15-0.4 s ahead of it: a 1 ms click (peak
    -30 dBFS) and 40-80 ms of band-passed codec noise at CLICK_NOISE_DBFS RMS."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(x), np.float32)
    for a, b in pauses(x):
        start = max(a, b - int(rng.uniform(0.15, 0.4) * SAMPLE_RATE))
        n = min(b - start, int(rng.uniform(0.04, 0.08) * SAMPLE_RATE))
        burst = scale_to(band_limit(rng.standard_normal(n).astype(np.float32), 200.0, 6000.0),
                         CLICK_NOISE_DBFS)
        k = min(n, SAMPLE_RATE // 1000)
        burst[:k] += 10 ** (-30 / 20) * np.exp(-np.arange(k) / (k / 5)) * rng.choice([-1, 1])
        out[start: start + n] = burst
    return out


def reverb(x: np.ndarray, seed: int) -> np.ndarray:
    """``x`` in a room: plus its convolution with exponentially decaying Gaussian noise (energy
    -60 dB after REVERB_RT60_S), scaled REVERB_DRR_DB under the direct sound."""
    rng = np.random.default_rng(seed)
    n_ir = int(REVERB_RT60_S * SAMPLE_RATE)
    ir = rng.standard_normal(n_ir) * np.exp(-6.908 * np.arange(n_ir) / n_ir)
    ir *= 10 ** (-REVERB_DRR_DB / 20) / np.sqrt(np.sum(ir ** 2))
    size = 1 << int(np.ceil(np.log2(len(x) + n_ir)))
    wet = np.fft.irfft(np.fft.rfft(x.astype(np.float64), size) * np.fft.rfft(ir, size), size)
    return (x + wet[: len(x)]).astype(np.float32)


OPUS_RATE = 24_000


def opus(x: np.ndarray) -> np.ndarray:
    """An Opus round trip (sphn; 24 kHz in, 48 kHz decoded, back to 16 kHz), shifted back by
    the codec's delay, found as the lag of the largest cross-correlation within 0.1 s."""
    import os
    import tempfile

    import soxr
    import sphn

    if not np.any(x):
        return x.copy()
    pcm = soxr.resample(x.astype(np.float32), SAMPLE_RATE, OPUS_RATE, quality="HQ")
    fd, path = tempfile.mkstemp(suffix=".opus")
    os.close(fd)
    try:
        sphn.write_opus(path, pcm[None, :].astype(np.float32), OPUS_RATE)
        decoded, rate = sphn.read_opus(path)
    finally:
        os.unlink(path)
    y = soxr.resample(np.asarray(decoded, np.float32)[0], int(rate), SAMPLE_RATE, quality="HQ")
    size = 1 << int(np.ceil(np.log2(len(x) + len(y))))
    corr = np.fft.irfft(np.fft.rfft(y, size) * np.conj(np.fft.rfft(x, size)), size)
    lag = int(np.argmax(corr[: SAMPLE_RATE // 10]))
    y = y[lag: lag + len(x)]
    return np.pad(y, (0, len(x) - len(y))).astype(np.float32)
