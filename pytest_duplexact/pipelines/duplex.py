"""One live duplex session as the pipelines see it, independent of the kind of model.

The three pipelines (direct.py, simulator.py, bargein.py) are written once against
``Duplex``; ``SteppedDuplex`` drives a frame-stepped model as fast as it computes, and the
streaming one (models/streaming.py) drives a hosted model on the wall clock. Both produce the
same ``Recording``: input and heard output on one clock whose t = 0 is the first input sample.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from ..audio import SAMPLE_RATE
from ..timeline import Cue, Word


@dataclass
class Recording:
    """What one trial produced, on the instance clock (16 kHz, t = 0 = first input sample).

    ``output`` is the model's audio as a listener would hear it; ``transcript`` the model's
    native time-aligned text (empty when the model supplies none)."""

    input: np.ndarray
    output: np.ndarray
    sample_rate: int = SAMPLE_RATE
    # True when time advances only by push() (a stepped model, no wall clock): nothing can
    # happen between two pushes, so a stretch with no online decision may be pushed whole.
    free_running: bool = False
    transcript: tuple[Word, ...] = ()
    cue: Cue | None = None
    user_sent_until: float | None = None
    events: list[tuple[float, str]] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return max(len(self.input), len(self.output)) / self.sample_rate


class Duplex(abc.ABC):
    """A running session. ``push`` advances time by the pushed audio's length."""

    sample_rate: int = SAMPLE_RATE

    @property
    @abc.abstractmethod
    def now(self) -> float:
        """Seconds of input pushed so far (the session clock)."""

    @abc.abstractmethod
    async def push(self, samples: np.ndarray) -> None:
        """Send input audio (16 kHz float32); returns when that audio has been consumed."""

    @abc.abstractmethod
    def heard(self) -> np.ndarray:
        """Model output heard so far, 16 kHz, aligned to the input clock."""

    @abc.abstractmethod
    def transcript(self) -> list[Word]:
        """Native transcript heard so far: never ahead of playback."""

    def event(self, what: str) -> None:
        self.events.append((self.now, what))

    @abc.abstractmethod
    async def close(self) -> Recording: ...
