"""Recover, immediate execution (SPEC §3, paper B.9): a substantive onset inside
[interruption_end - 2.0 s, interruption_end + 5.0 s]; the interruption is the injected cue.
Trials where the cue did not overlap model speech are EXCLUDED.
Timing: recovery_latency = recovery onset - interruption end."""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, failure, success
from ..data.taxonomy import RECOVER_WINDOW
from ..data.timeline import Timeline
from .action_rule import SIMULATOR_REPLAY, Rule, Trial
from .common import fmt_near, fmt_window, onsets_in, substantive
from .hold_floor import excluded
from .speech import model_before, segments_text


def window(tl: Timeline) -> tuple[float, float]:
    return tl.cue.end + RECOVER_WINDOW[0], tl.cue.end + RECOVER_WINDOW[1]


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    ex = excluded(tl)
    if ex:
        return ex
    lo, hi = window(tl)
    hits = onsets_in(substantive(tl), lo, hi)
    if hits:
        offset = fmt_near(hits[0].start - tl.cue.end, lo - tl.cue.end, hi - tl.cue.end,
                          sign="+")
        return success(f"substantive recovery at {offset} s of the interruption end, inside "
                       f"{fmt_window(lo, hi)}", window=(lo, hi), onset=hits[0].start)
    return failure(f"no substantive onset inside {fmt_window(lo, hi)} (interruption ends "
                   f"{tl.cue.end:.2f} s)", window=(lo, hi))


def recovery_latency(tl: Timeline, imm: ImmediateResult) -> float | None:
    """The immediate result's onset - the interruption (cue) end."""
    return imm.onset - tl.cue.end if imm.success else None


class Recover(Rule):
    action = "recover"
    _requirements = SIMULATOR_REPLAY

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline)

    def timing(self, trial: Trial, imm: ImmediateResult) -> float | None:
        return recovery_latency(trial.timeline, imm)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.9: the interrupted contribution (model speech before the cue started), the
        interruption (the cue's text) and the recovery (segments with onset in the recover
        window)."""
        inst, tl = trial.instance, trial.timeline
        lo, hi = window(tl)
        return {"interrupted_contribution": model_before(tl, tl.cue.start),
                "interruption": inst.text("cue"),
                "model_recovery": segments_text(onsets_in(tl.segments, lo, hi))}


RULE = Recover()
