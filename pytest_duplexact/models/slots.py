"""``step_batch`` for models whose trial state lives on the model object (the built-ins):
each slot steps its own shallow copy of the model, so a slot's output is exactly what the
model alone would give (``models/contract.py``, ``BatchedSteppedModel``).

The copy is made at ``start_slot`` from the model as built, and ``start`` sets its trial
state, as it does for one trial at a time; a subclass overriding ``step`` is stepped through
its own ``step``. One slot's exception is returned as its answer: the other slots go on.
"""

from __future__ import annotations

import copy
from typing import Mapping

import numpy as np

from .contract import DuplexModel, SessionInfo


class PerSlotBatch(DuplexModel):
    """Base: the batched contract on top of a model's own ``start`` / ``step`` / ``finish``
    (a ``DuplexModel`` whose slots reset alone, whichever base comes first beside it)."""

    slots_reset_alone = True

    def open_batch(self, size: int) -> None:
        self._slots: dict[int, object] = {}

    def start_slot(self, slot: int, info: SessionInfo) -> None:
        one = copy.copy(self)
        one.start(info)
        self._slots[slot] = one

    def step_batch(self, frames: Mapping[int, np.ndarray]) -> dict:
        out: dict = {}
        slots = self._slots
        for slot, frame in frames.items():
            try:
                out[slot] = slots[slot].step(frame)
            except Exception as e:  # this slot's trial fails; the others go on
                out[slot] = e
        return out

    def finish_slot(self, slot: int) -> None:
        one = self._slots.pop(slot, None)
        if one is not None:
            one.finish()
