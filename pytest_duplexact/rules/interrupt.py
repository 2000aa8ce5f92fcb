"""Interrupt, immediate execution (SPEC §3, paper B.6): a substantive onset inside
[user_start, user_end - 1.0 s]. Timing: interruption_timing_difference = that onset - the
authored target point (negative = early); the target never decides success."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult, failure, success
from ..taxonomy import INTERRUPT_END_MARGIN_S
from ..timeline import Timeline
from .common import fmt_window, onsets_in, substantive


def window(ann: Annotations) -> tuple[float, float]:
    return ann.user_start, ann.user_end - INTERRUPT_END_MARGIN_S


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    lo, hi = window(ann)
    subs = substantive(tl)
    hits = onsets_in(subs, lo, hi) if hi >= lo else []
    if hits:
        return success(f"substantive interruption at {hits[0].start:.2f} s, inside "
                       f"{fmt_window(lo, hi)}", window=(lo, hi), onset=hits[0].start)
    later = [s for s in subs if s.start > hi]
    if later:
        return failure(f"first substantive onset after the window at {later[0].start:.2f} s "
                       f"(window {fmt_window(lo, hi)}, user ends {ann.user_end:.2f} s)",
                       window=(lo, hi))
    return failure(f"no substantive onset inside {fmt_window(lo, hi)}", window=(lo, hi))


def timing_difference(ann: Annotations, tl: Timeline) -> float | None:
    r = immediate(ann, tl)
    if not r.success or ann.interrupt_target is None:
        return None
    return r.onset - ann.interrupt_target
