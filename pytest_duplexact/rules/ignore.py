"""Ignore, immediate execution: no substantive model segment overlaps the distractor
interval [other_start, other_end] (SPEC §3, paper B.8)."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult
from ..timeline import Timeline
from .common import silent_through


def window(ann: Annotations) -> tuple[float, float]:
    return ann.other_start, ann.other_end


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    lo, hi = window(ann)
    return silent_through(tl, lo, hi, "the distractor")
