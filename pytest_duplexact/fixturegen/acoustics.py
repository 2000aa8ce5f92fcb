"""The acoustic rendering of non-addressed speech, exactly as SPEC §8 states it.

Other-directed speech (the user turning to someone else): same voice as the user, -8 dB, -5 dB
above 4 kHz, early reflections at 45 ms (-6 dB) and 120 ms (-12 dB). Background speech (a
distant third party): another voice, -15 dB, 3 kHz low-pass, a 100 ms echo at -10 dB. Addressed
speech is left untouched. Levels are relative to the addressed speech, which every phrase shares
(tts.SPEECH_LEVEL_DBFS).

Filters are applied in the frequency domain (zero phase, deterministic, no extra dependency),
with a 200 Hz raised-cosine transition so the band edge does not ring audibly.
"""

from __future__ import annotations

import numpy as np

from . import tts

SR = tts.SR
OTHER_DIRECTED_GAIN_DB = -8.0
OTHER_DIRECTED_SHELF = (4000.0, -5.0)  # Hz, dB above it
OTHER_DIRECTED_REFLECTIONS = ((0.045, -6.0), (0.120, -12.0))  # seconds, dB
BACKGROUND_GAIN_DB = -15.0
BACKGROUND_LOWPASS_HZ = 3000.0
BACKGROUND_ECHO = ((0.100, -10.0),)
_TRANSITION_HZ = 200.0
_PAD_S = 0.05  # room for the filters' zero-phase tails on both sides, trimmed again after


def db(gain_db: float) -> float:
    return 10 ** (gain_db / 20)


def add_delays(x: np.ndarray, taps: tuple[tuple[float, float], ...]) -> np.ndarray:
    """x plus delayed, attenuated copies of itself; the output is longer by the last delay."""
    n = x.size + max(int(round(d * SR)) for d, _ in taps)
    y = np.zeros(n, np.float64)
    y[:x.size] += x
    for delay, gain in taps:
        k = int(round(delay * SR))
        y[k:k + x.size] += db(gain) * x
    return y


def band_gain(x: np.ndarray, edge_hz: float, below_db: float, above_db: float) -> np.ndarray:
    """Apply ``below_db`` under ``edge_hz`` and ``above_db`` over it (a shelf or a low-pass)."""
    n = x.size
    spec = np.fft.rfft(x, n)
    f = np.fft.rfftfreq(n, 1 / SR)
    # 0 -> 1 across [edge - T/2, edge + T/2] on a raised cosine.
    t = np.clip((f - edge_hz + _TRANSITION_HZ / 2) / _TRANSITION_HZ, 0.0, 1.0)
    ramp = 0.5 - 0.5 * np.cos(np.pi * t)
    gain = db(below_db) * (1 - ramp) + db(above_db) * ramp
    return np.fft.irfft(spec * gain, n)


def other_directed(x: np.ndarray) -> np.ndarray:
    """Addressed speech of the user -> the same speech said off-axis to someone else."""
    y = add_delays(_pad(x), OTHER_DIRECTED_REFLECTIONS)
    edge, shelf_db = OTHER_DIRECTED_SHELF
    y = band_gain(y, edge, 0.0, shelf_db)
    return _finish(y * db(OTHER_DIRECTED_GAIN_DB))


def background(x: np.ndarray) -> np.ndarray:
    """Speech of another voice -> a distant third party in the room."""
    y = band_gain(_pad(x), BACKGROUND_LOWPASS_HZ, 0.0, -200.0)
    y = add_delays(y, BACKGROUND_ECHO)
    return _finish(y * db(BACKGROUND_GAIN_DB))


def _pad(x: np.ndarray) -> np.ndarray:
    z = np.zeros(int(_PAD_S * SR))
    return np.concatenate([z, np.asarray(x, np.float64), z])


def _finish(y: np.ndarray) -> np.ndarray:
    """Trim to the audible extent (reflections and echo included) with the phrases' rule."""
    return tts.trim(y).astype(np.float32)
