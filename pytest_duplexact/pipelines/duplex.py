"""One live duplex session as the pipelines see it, independent of the kind of model.

The three pipelines (direct.py, simulator.py, bargein.py) are written once against
``Duplex``; ``SteppedDuplex`` drives a frame-stepped model as fast as it computes, and the
streaming one (pipelines/streaming_duplex.py) drives a hosted model on the wall clock. Both make the
same ``Recording`` (recording.py): input and heard output on one clock whose t = 0 is the
first input sample.
"""

from __future__ import annotations

import abc

import numpy as np

from ..data.recording import SAMPLE_RATE, Recording
from ..data.timeline import Word

__all__ = ["Duplex", "Recording", "Track"]


class Track:
    """A growable float32 buffer (both duplexes' tracks); ``view()`` is O(1) so ``heard()`` can
    be polled often."""

    def __init__(self, capacity: int = SAMPLE_RATE * 30):
        self._buf = np.zeros(capacity, dtype=np.float32)
        self.size = 0

    def append(self, samples: np.ndarray) -> None:
        n = len(samples)
        if self.size + n > len(self._buf):
            grown = np.zeros(max(2 * len(self._buf), self.size + n), dtype=np.float32)
            grown[: self.size] = self._buf[: self.size]
            self._buf = grown
        self._buf[self.size: self.size + n] = samples
        self.size += n

    def view(self) -> np.ndarray:
        return self._buf[: self.size]


class Duplex(abc.ABC):
    """A running session. ``push`` advances time by the pushed audio's length."""

    sample_rate: int = SAMPLE_RATE
    # True when time advances only by push() (a stepped model, no wall clock): nothing can
    # happen between two pushes, so a stretch with no online decision may be pushed whole.
    free_running: bool = False
    # True when push() streams audio of any length at the input's own pace on the wall clock
    # (chunk by chunk, each at its slot): a stretch with no online decision may be pushed
    # whole there too, and the pipeline's task wakes once instead of every 40 ms.
    streams_pushes: bool = False

    @property
    @abc.abstractmethod
    def now(self) -> float:
        """Seconds of input pushed so far (the session clock)."""

    @abc.abstractmethod
    async def push(self, samples: np.ndarray) -> None:
        """Send input audio (16 kHz float32); returns when that audio has been consumed."""

    def expect(self, samples: np.ndarray) -> None:
        """A hint: the next pushes will most likely carry ``samples`` (a prerecorded clip), so
        work per push may be done once ahead. Pushing anything else stays correct."""

    async def prepare(self, samples: np.ndarray) -> None:
        """``expect`` for a pipeline: a duplex on the wall clock does that work off its event
        loop's thread, which paces every live session."""
        self.expect(samples)

    async def read_clip(self, clip) -> np.ndarray:
        """``clip.load()``; a duplex on the wall clock decodes off its loop's thread too."""
        return clip.load()

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
