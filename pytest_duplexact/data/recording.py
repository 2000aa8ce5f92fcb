"""What one trial produced: the ``Recording`` every pipeline returns and every later stage
reads (segmentation, the harness, ``recorded:DIR``). Plain data: the type imports no audio
library; reading and writing it is recording_io.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .timeline import Cue, Word

if TYPE_CHECKING:
    import numpy as np

SAMPLE_RATE = 16_000  # the benchmark's input rate (SPEC §2)


@dataclass
class Recording:
    """What one trial produced, on the instance clock (16 kHz, t = 0 = first input sample).

    ``output`` is the model's audio as a listener would hear it; ``transcript`` the model's
    native time-aligned text (empty when the model supplies none). ``input`` is the user's
    side as the pipeline played it (clean even under a channel)."""

    input: np.ndarray
    output: np.ndarray
    sample_rate: int = SAMPLE_RATE
    transcript: tuple[Word, ...] = ()
    cue: Cue | None = None
    user_sent_until: float | None = None
    events: list[tuple[float, str]] = field(default_factory=list)
    # what the model's provider reported for this trial, every attempt included (usage.py)
    usage: dict = field(default_factory=dict)
    # a wall-clock trial's own lateness (pipelines/clock.py: input_lag_max_ms,
    # output_lag_max_ms, loop_stall_max_ms); None for a stepped trial, which has no wall clock
    clock: dict | None = None
    # under --duplexact-channel: what the model heard (pipelines/channel.py); ``input`` then
    # stays the clean user track. None for a clean trial.
    channel_input: np.ndarray | None = None

    @property
    def duration(self) -> float:
        return max(len(self.input), len(self.output)) / self.sample_rate
