"""Stop (SPEC §3-§5, paper B.4). Rules only, no judge.

Trial validity: the model must be speaking at cue onset, else the trial is EXCLUDED.
Immediate: the model turn active at cue onset ends before the recording ends (no deadline).
Subsequent: after that first stop, no new substantive onset before the last 1.0 s of the
intervention (cue); onsets in that last second or after it are fine. NOT_APPLICABLE when the
first stop came only after the intervention ended.
Timing: yield_latency = end of the active turn - cue onset.
"""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, SubsequentResult, Verdict, failure, success
from ..data.taxonomy import STOP_FINAL_GRACE_S
from ..data.timeline import Timeline
from .action_rule import SIMULATOR_REPLAY, Rule, Trial
from .common import END_TOLERANCE_S, EPS, active_at, fmt_window, list_segments, substantive


def _excluded(tl: Timeline) -> ImmediateResult | None:
    if tl.cue is None:
        return ImmediateResult(Verdict.EXCLUDED, "no cue was injected")
    if active_at(tl, tl.cue.start) is None:
        return ImmediateResult(Verdict.EXCLUDED, f"model was not speaking at cue onset "
                               f"({tl.cue.start:.2f} s)")
    return None


def _runs_to_end(turn, tl: Timeline) -> bool:
    return turn.end >= tl.duration - END_TOLERANCE_S - EPS


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    ex = _excluded(tl)
    if ex:
        return ex
    turn = active_at(tl, tl.cue.start)
    ev = {"active_turn": {"start": turn.start, "end": turn.end, "text": turn.text}}
    if _runs_to_end(turn, tl):
        return failure(f"the turn active at cue onset ({tl.cue.start:.2f} s) never ends: it "
                       f"runs to the end of the recording ({tl.duration:.2f} s)", evidence=ev)
    return success(f"the turn active at cue onset ({tl.cue.start:.2f} s) ends at "
                   f"{turn.end:.2f} s", onset=turn.end, evidence=ev)


def yield_latency(tl: Timeline, imm: ImmediateResult) -> float | None:
    """End of the turn active at cue onset (the immediate result's onset) - cue onset."""
    return imm.onset - tl.cue.start if imm.success else None


def subsequent(tl: Timeline, imm: ImmediateResult) -> SubsequentResult:
    """S by rule, from the immediate result (its onset is the first stop)."""
    if not imm.success:
        return SubsequentResult(Verdict.NOT_APPLICABLE, "immediate execution did not succeed",
                                judge="rule")
    first_stop, cue = imm.onset, tl.cue
    if first_stop >= cue.end - EPS:
        return SubsequentResult(Verdict.NOT_APPLICABLE, f"the first stop ({first_stop:.2f} s) "
                                f"came only when the intervention ended ({cue.end:.2f} s) "
                                "or later", judge="rule")
    limit = cue.end - STOP_FINAL_GRACE_S
    if first_stop >= limit - EPS:
        return SubsequentResult(Verdict.SUCCESS, f"stopped at {first_stop:.2f} s, inside the "
                                f"intervention's last {STOP_FINAL_GRACE_S:g} s "
                                f"{fmt_window(limit, cue.end)}, where new onsets are allowed",
                                judge="rule")
    early = [s for s in substantive(tl) if first_stop - EPS <= s.start < limit - EPS]
    if early:
        return SubsequentResult(Verdict.FAILURE, f"new substantive turn during the "
                                f"intervention, before its last {STOP_FINAL_GRACE_S:g} s "
                                f"{fmt_window(first_stop, limit)}: {list_segments(early)}",
                                judge="rule")
    return SubsequentResult(Verdict.SUCCESS, f"stayed yielded from {first_stop:.2f} s until "
                            f"{limit:.2f} s (intervention ends {cue.end:.2f} s)", judge="rule")


class Stop(Rule):
    action = "stop"
    _requirements = SIMULATOR_REPLAY

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline)

    def subsequent(self, trial: Trial, imm: ImmediateResult) -> SubsequentResult:
        return subsequent(trial.timeline, imm)

    def timing(self, trial: Trial, imm: ImmediateResult) -> float | None:
        return yield_latency(trial.timeline, imm)


RULE = Stop()
