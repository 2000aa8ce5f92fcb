"""Recover, immediate execution (SPEC §3, paper B.9): a substantive onset inside
[interruption_end - 2.0 s, interruption_end + 5.0 s]; the interruption is the injected cue.
Trials where the cue did not overlap model speech are EXCLUDED.
Timing: recovery_latency = recovery onset - interruption end."""

from __future__ import annotations

from ..instance import Annotations
from ..results import ImmediateResult, failure, success
from ..taxonomy import RECOVER_WINDOW
from ..timeline import Timeline
from .common import fmt_window, onsets_in, substantive
from .hold_floor import excluded


def window(tl: Timeline) -> tuple[float, float]:
    return tl.cue.end + RECOVER_WINDOW[0], tl.cue.end + RECOVER_WINDOW[1]


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    ex = excluded(tl)
    if ex:
        return ex
    lo, hi = window(tl)
    hits = onsets_in(substantive(tl), lo, hi)
    if hits:
        return success(f"substantive recovery at {hits[0].start - tl.cue.end:+.2f} s of the "
                       f"interruption end, inside {fmt_window(lo, hi)}", window=(lo, hi),
                       onset=hits[0].start)
    return failure(f"no substantive onset inside {fmt_window(lo, hi)} (interruption ends "
                   f"{tl.cue.end:.2f} s)", window=(lo, hi))


def recovery_latency(ann: Annotations, tl: Timeline) -> float | None:
    r = immediate(ann, tl)
    return r.onset - tl.cue.end if r.success else None
