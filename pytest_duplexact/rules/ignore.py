"""Ignore, immediate execution: no substantive model segment overlaps the distractor
interval [other_start, other_end] (SPEC §3, paper B.8)."""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult
from ..data.timeline import Timeline
from .action_rule import Requirements, Rule, Trial
from .common import silent_through
from .speech import join, model_after, user_text, user_words


def window(ann: Annotations) -> tuple[float, float]:
    return ann.other_start, ann.other_end


def immediate(ann: Annotations, tl: Timeline) -> ImmediateResult:
    lo, hi = window(ann)
    return silent_through(tl, lo, hi, "the distractor")


class Ignore(Rule):
    action = "ignore"
    _requirements = Requirements(
        clips=("user",),
        annotations=("user_start", "user_end", "other_start", "other_end"),
        texts=("user", "ignored"),
        within_user=(("other_start", "other_end",
                      "the distractor must lie inside the user turn (SPEC §8)"),))

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.8: addressed speech (user words outside the distractor interval), the ignored
        speech (``text.ignored``) and model speech after the distractor ended."""
        inst = trial.instance
        lo, hi = window(inst.annotations)
        ignored = inst.text("ignored")
        if user_words(inst):
            addressed = user_text(inst, lambda w: w.end <= lo or w.start >= hi)
        else:  # text.user may or may not spell the distractor; never show it as addressed
            addressed = join(inst.text("user").split(ignored)) if ignored else inst.text("user")
        return {"addressed_user_speech": addressed, "ignored_speech": ignored,
                "model_response": model_after(trial.timeline, hi)}


RULE = Ignore()
