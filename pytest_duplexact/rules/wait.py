"""Wait, immediate execution: no substantive model segment overlaps the wait window.

Window: the annotated pause for the two pause conditions, the whole user speech for
continuous_speech (SPEC §3, paper B.2). S (B.2): the judge reads the user's continuing
contribution and the model's later response; no later response is a failure without asking.
"""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, SubsequentResult, Verdict
from ..data.taxonomy import WAIT_PAUSE_CONDITIONS
from ..data.timeline import Timeline
from .action_rule import Requirements, Rule, Trial
from .common import silent_through
from .speech import model_from, user_text


def window(ann: Annotations, condition: str) -> tuple[float, float]:
    if condition in WAIT_PAUSE_CONDITIONS:
        return ann.pause_start, ann.pause_end
    return ann.user_start, ann.user_end


def immediate(ann: Annotations, tl: Timeline, condition: str) -> ImmediateResult:
    lo, hi = window(ann, condition)
    return silent_through(tl, lo, hi, "the wait window")


class Wait(Rule):
    action = "wait"

    def requires(self, condition: str) -> Requirements:
        pause = condition in WAIT_PAUSE_CONDITIONS
        return Requirements(
            clips=("user",),
            annotations=("user_start", "user_end") + (("pause_start", "pause_end") if pause
                                                       else ()),
            texts=("user",),
            within_user=((("pause_start", "pause_end",
                           "the pause must lie inside the user speech"),) if pause else ()))

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline, trial.condition)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.2: the user's speech during or after the wait interval (pause conditions: words
        ending after the pause starts; continuous speech: the whole turn) and the model's
        later response (segments starting once the wait interval is over)."""
        inst, cond = trial.instance, trial.instance.cond
        lo, hi = window(inst.annotations, cond.id)
        if cond.id in WAIT_PAUSE_CONDITIONS:
            user = user_text(inst, lambda w: w.end > lo, "the speech during or after the pause")
        else:
            user = user_text(inst)
        return {"condition_id": cond.prompt_id, "condition_context": cond.judge_context or "",
                "user_during_or_after_wait": user,
                "model_response": model_from(trial.timeline, hi)}

    def without_judge(self, fields: dict[str, str]) -> SubsequentResult | None:
        if not fields["model_response"]:
            return SubsequentResult(Verdict.FAILURE, "no later response after the wait "
                                    "interval", judge="rule", evidence={"fields": fields})
        return None


RULE = Wait()
