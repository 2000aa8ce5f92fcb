"""Ignore, immediate execution: no substantive model segment overlaps the distractor
interval [other_start, other_end] (SPEC §3, paper B.8)."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult, failure, success
from ..timeline import Timeline
from .common import fmt_window, list_segments, overlapping, substantive


def window(ann: Annotations) -> tuple[float, float]:
    return ann.other_start, ann.other_end


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    lo, hi = window(ann)
    hits = overlapping(substantive(tl), lo, hi)
    if hits:
        return failure(f"substantive speech overlaps the distractor {fmt_window(lo, hi)}: "
                       f"{list_segments(hits)}", window=(lo, hi), onset=hits[0].start)
    return success(f"no substantive speech overlaps the distractor {fmt_window(lo, hi)}",
                   window=(lo, hi))
