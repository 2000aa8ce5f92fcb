"""Interrupt, immediate execution (SPEC §3, paper B.6): a substantive onset inside
[user_start, user_end - 1.0 s]. Timing: interruption_timing_difference = that onset - the
authored target point (negative = early); the target never decides success."""

from __future__ import annotations

import math

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, failure, success
from ..data.taxonomy import INTERRUPT_END_MARGIN_S
from ..data.timeline import Timeline
from .action_rule import Requirements, Rule, Trial
from .common import fmt_near, fmt_window, onsets_in, substantive
from .speech import model_from, user_text, user_words


def window(ann: Annotations) -> tuple[float, float]:
    return ann.user_start, ann.user_end - INTERRUPT_END_MARGIN_S


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    lo, hi = window(ann)
    subs = substantive(tl)
    hits = onsets_in(subs, lo, hi) if hi >= lo else []
    if hits:
        return success(f"substantive interruption at {fmt_near(hits[0].start, lo, hi)} s, "
                       f"inside {fmt_window(lo, hi)}", window=(lo, hi), onset=hits[0].start)
    later = [s for s in subs if s.start > hi]
    if later:
        return failure(f"first substantive onset after the window at "
                       f"{fmt_near(later[0].start, hi)} s (window {fmt_window(lo, hi)}, user "
                       f"ends {ann.user_end:.2f} s)", window=(lo, hi), onset=later[0].start)
    return failure(f"no substantive onset inside {fmt_window(lo, hi)}", window=(lo, hi))


def timing_difference(ann: Annotations, imm: ImmediateResult) -> float | None:
    """The immediate result's onset - the authored target point (negative: early)."""
    if not imm.success or ann.interrupt_target is None:
        return None
    return imm.onset - ann.interrupt_target


class Interrupt(Rule):
    action = "interrupt"
    _requirements = Requirements(
        clips=("user",),
        annotations=("user_start", "user_end", "interrupt_target"), texts=("user",),
        within_user=(("interrupt_target", "interrupt_target",
                      "must lie inside the user speech"),))

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline)

    def timing(self, trial: Trial, imm: ImmediateResult) -> float | None:
        return timing_difference(trial.annotations, imm)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.6: what the user said (the part that was streamed when barge-in cut it short and
        the user clip has timed words, else the whole utterance) and the model's interruption
        from its qualifying onset on."""
        inst, tl = trial.instance, trial.timeline
        cond = inst.cond
        sent = tl.user_sent_until if tl.user_sent_until is not None else math.inf
        if user_words(inst):
            user = user_text(inst, lambda w: w.start < sent)
        else:  # no timing to cut at: the whole utterance still says what was underway
            user = user_text(inst)
        return {"condition_id": cond.prompt_id, "condition_context": cond.judge_context or "",
                "user_speech": user,
                "model_interruption": model_from(tl, imm.onset if imm.success else None)}


RULE = Interrupt()
