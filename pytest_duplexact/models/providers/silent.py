"""``silent``: never makes a sound. The lower bound: every action that needs the model to
speak fails, wait and ignore succeed trivially, and simulator trials are excluded (the cue
never overlaps model speech)."""

from __future__ import annotations

import numpy as np

from ..contract import SessionInfo
from ..slots import PerSlotBatch


class SilentModel(PerSlotBatch):  # --duplexact-batch: models/slots.py
    name = "silent"
    sample_rate = 16_000
    frame_size = 320  # 20 ms

    def __init__(self):
        self._frame = np.zeros(self.frame_size, dtype=np.float32)
        self._frame.flags.writeable = False  # one shared frame, never copied per step

    def start(self, info: SessionInfo) -> None:
        pass

    def step(self, frame: np.ndarray) -> np.ndarray:
        return self._frame

    def step_many(self, frames: np.ndarray) -> np.ndarray:
        """Silence for ``len(frames)`` frames in one call (pipelines/stepped.py)."""
        return np.zeros((len(frames), self.frame_size), dtype=np.float32)

    def finish(self) -> None:
        pass
