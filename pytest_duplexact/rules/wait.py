"""Wait, immediate execution: no substantive model segment overlaps the wait window.

Window: the annotated pause for the two pause conditions, the whole user speech for
continuous_speech (SPEC §3, paper B.2)."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult, failure, success
from ..timeline import Timeline
from .common import fmt_window, list_segments, overlapping, substantive


def window(ann: Annotations, condition: str) -> tuple[float, float]:
    if condition == "continuous_speech":
        return ann.user_start, ann.user_end
    return ann.pause_start, ann.pause_end


def immediate(ann: Annotations, tl: Timeline, condition: str) -> ImmediateResult:
    lo, hi = window(ann, condition)
    hits = overlapping(substantive(tl), lo, hi)
    if hits:
        return failure(f"substantive speech overlaps the wait window {fmt_window(lo, hi)}: "
                       f"{list_segments(hits)}", window=(lo, hi), onset=hits[0].start)
    return success(f"no substantive speech overlaps the wait window {fmt_window(lo, hi)}",
                   window=(lo, hi))
