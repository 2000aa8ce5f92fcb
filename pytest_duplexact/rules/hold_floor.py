"""Hold floor, immediate execution (SPEC §3, paper B.5).

Window [cue_start, cue_end + 1.0 s]; success when the model speaks in it and the longest
silence gap inside it (leading and trailing gaps included) is <= 0.50 s. Gaps are measured on
the raw VAD speech intervals, before short-gap merging. Trials where the cue does not overlap
model speech are EXCLUDED. Subsequent is NOT_APPLICABLE without model speech after the cue.
"""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, SubsequentResult, Verdict, failure, success
from ..data.taxonomy import HOLD_FLOOR_MAX_GAP_S, HOLD_FLOOR_TAIL_S
from ..data.timeline import Timeline
from .action_rule import SIMULATOR_REPLAY, Rule, Trial
from .common import EPS, exceeds, fmt_near, fmt_window, silence_gaps, speech_overlaps
from .speech import model_after, model_before


def window(tl: Timeline) -> tuple[float, float]:
    return tl.cue.start, tl.cue.end + HOLD_FLOOR_TAIL_S


def excluded(tl: Timeline) -> ImmediateResult | None:
    if tl.cue is None:
        return ImmediateResult(Verdict.EXCLUDED, "no cue was injected")
    if not speech_overlaps(tl, tl.cue.span):
        return ImmediateResult(Verdict.EXCLUDED, f"the cue {tl.cue.span} did not overlap "
                               "model speech")
    return None


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    ex = excluded(tl)
    if ex:
        return ex
    lo, hi = window(tl)
    gaps = silence_gaps(tl.speech_spans, lo, hi)
    # Unreachable after the exclusion above (speech overlapping the cue lies in the window);
    # kept so the rule stays right on its own.
    if gaps and gaps[0].start == lo and gaps[0].end == hi:
        return failure(f"no model speech in the window {fmt_window(lo, hi)}", window=(lo, hi))
    longest = max(gaps, key=lambda g: g.duration, default=None)
    if longest is not None and exceeds(longest.duration, HOLD_FLOOR_MAX_GAP_S):
        return failure(f"silence gap of {fmt_near(longest.duration, HOLD_FLOOR_MAX_GAP_S)} s "
                       f"at {longest} inside "
                       f"{fmt_window(lo, hi)} (max {HOLD_FLOOR_MAX_GAP_S:.2f} s)",
                       window=(lo, hi), evidence={"longest_gap": longest.duration})
    g = 0.0 if longest is None else longest.duration
    return success(f"held the floor through {fmt_window(lo, hi)}; longest gap "
                   f"{fmt_near(g, HOLD_FLOOR_MAX_GAP_S)} s",
                   window=(lo, hi), evidence={"longest_gap": g})


def has_speech_after_cue(tl: Timeline) -> bool:
    return any(s.end > tl.cue.end + EPS for s in tl.segments)


class HoldFloor(Rule):
    action = "hold_floor"
    _requirements = SIMULATOR_REPLAY

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline)

    def subsequent(self, trial: Trial, imm: ImmediateResult) -> SubsequentResult | None:
        tl = trial.timeline
        if tl.cue is None or not has_speech_after_cue(tl):
            return SubsequentResult(Verdict.NOT_APPLICABLE, "no model speech after the cue "
                                    "ended", judge="rule")
        return None

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.5: model speech before and during the cue / after cue offset, the cue's text and
        the condition's required adaptation. The human reference continuation is not given."""
        inst, tl = trial.instance, trial.timeline
        cond, cue_end = inst.cond, tl.cue.end
        return {"condition_id": cond.prompt_id, "required_adjustment": cond.judge_context or "",
                "cue": inst.text("cue"),
                "model_through_cue": model_before(tl, cue_end),
                "model_after_cue": model_after(tl, cue_end)}


RULE = HoldFloor()
