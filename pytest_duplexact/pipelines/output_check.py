"""What model output must be before it is recorded: mono float samples, finite, and not far
above full scale. Anything else is a broken model (int16 passed as float, a gain bug, a
diverged decoder), an error of the instance, never a miss: scoring it would blame the VAD.

Samples between 1.0 and ``FULL_SCALE_LIMIT`` are loud but plausible (a codec's overshoot);
they are clipped to full scale when the recording is written (docs/models.md).
"""

from __future__ import annotations

import numpy as np

FULL_SCALE_LIMIT = 2.0  # +6 dBFS


def dtype_problem(raw: np.ndarray) -> str | None:
    if raw.dtype.kind in "iu":
        return (f"{raw.dtype} samples; return float32 in [-1, 1] (for 16-bit PCM: "
                "x / 32768)")
    if raw.dtype.kind not in "f":
        return f"samples of dtype {raw.dtype}; return float32 in [-1, 1]"
    return None


def level_problem(audio: np.ndarray) -> str | None:
    """None when every sample is finite and within +-FULL_SCALE_LIMIT, else what is wrong.
    The hot path of a stepped run: one float32 sum of squares proves both for any frame
    whose energy is below the limit (NaN fails the comparison, a huge value overflows)."""
    ss = audio.dot(audio)
    if ss <= FULL_SCALE_LIMIT * FULL_SCALE_LIMIT:
        return None
    if not np.isfinite(audio).all():
        return "non-finite samples (NaN or inf)"
    peak = float(np.abs(audio).max())
    if peak > FULL_SCALE_LIMIT:
        return (f"samples far above full scale (peak {peak:.3g}, limit {FULL_SCALE_LIMIT:g}; "
                "expected float32 in [-1, 1])")
    return None
