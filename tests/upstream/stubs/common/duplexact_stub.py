"""What every stub shares: the one decision rule, the one answer, and the log of decisions.

Loaded into the author's process (their environment: numpy is all it needs), first on its
``PYTHONPATH``. The rule: the user has stopped once ``ANSWER_AFTER_S`` of input has gone by
without speech since speech was heard; then the answer is ``SENTENCE`` as text and
``ANSWER_S`` (1 s) of a voice-like tone (a 140 Hz fundamental and its harmonics, syllable-shaped
at 4 Hz, so a VAD hears it as voice). Each decision is written as a JSON line
``{"t": time.monotonic(), "event": ...}`` to the file ``$DUPLEXACT_STUB_LOG`` names:
CLOCK_MONOTONIC is the same clock in the harness's process, so onsets compare directly.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np

ANSWER_AFTER_S = 0.5
# the answer's length: 1 s, or $DUPLEXACT_STUB_ANSWER_S (a barge-in needs one to talk over)
ANSWER_S = float(os.environ.get("DUPLEXACT_STUB_ANSWER_S") or 1.0)
SENTENCE = "Yes, I hear you, and this is the stub's fixed answer."
SPEECH_RMS = 0.01   # input louder than this (full scale 1.0) is speech
_lock = threading.Lock()


def log(event: str, **fields: object) -> float:
    """Record a decision now; returns its monotonic time."""
    t = time.monotonic()
    path = os.environ.get("DUPLEXACT_STUB_LOG")
    if path:
        with _lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": t, "event": event, **fields}) + "\n")
    return t


def voice(seconds: float = ANSWER_S, rate: int = 24_000, offset: int = 0) -> np.ndarray:
    """Samples [offset, offset + seconds * rate) of the answer, float32 in [-1, 1]."""
    n = int(round(seconds * rate))
    t = (np.arange(n) + offset) / rate
    tone = sum(np.sin(2 * np.pi * 140.0 * k * t) / k for k in range(1, 6))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t) ** 2
    return (0.25 * tone * envelope).astype(np.float32)


class EndOfTurn:
    """The decision, fed the input's loudness span by span (any span length)."""

    def __init__(self) -> None:
        self.heard = False
        self.silent_s = 0.0

    def feed(self, rms: float, seconds: float) -> bool:
        """True once, when the user has stopped (then it starts over)."""
        if rms >= SPEECH_RMS:
            self.heard, self.silent_s = True, 0.0
            return False
        if not self.heard:
            return False
        self.silent_s += seconds
        if self.silent_s + 1e-9 < ANSWER_AFTER_S:
            return False
        self.heard, self.silent_s = False, 0.0
        return True
