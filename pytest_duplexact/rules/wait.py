"""Wait, immediate execution: no substantive model segment overlaps the wait window.

Window: the annotated pause for the two pause conditions, the whole user speech for
continuous_speech (SPEC §3, paper B.2)."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult
from ..timeline import Timeline
from .common import silent_through


def window(ann: Annotations, condition: str) -> tuple[float, float]:
    if condition == "continuous_speech":
        return ann.user_start, ann.user_end
    return ann.pause_start, ann.pause_end


def immediate(ann: Annotations, tl: Timeline, condition: str) -> ImmediateResult:
    lo, hi = window(ann, condition)
    return silent_through(tl, lo, hi, "the wait window")
