"""Scores one trial: (instance, timeline[, judges]) -> immediate, subsequent, timing.

The action's rule (``rules.RULES``) decides; this module looks it up and holds the order of
the stages: subsequent only after immediate success (SPEC §4), and within subsequent "the rule
decides, else ask the judge". The judges only answer the prompts they are given; they come in
from the caller as a ``Judges`` object (judges.JudgePanel is one), so the rules import no judge.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

from ..data.annotations import Instance
from ..data.results import ImmediateResult, SubsequentResult, Verdict
from ..data.timeline import Segment, Timeline
from . import RULES, Trial, action_rule, borderline
from .backchannel import Judgement


class Judges(action_rule.Judges, Protocol):
    """What scoring asks of the judges: the backchannel stages of immediate execution
    (action_rule.Judges), and the text judge's answer to an action's subsequent prompt."""

    def missing_text_judge(self) -> str | None:
        """Why there is no text judge (the NOT_JUDGED reason), or ``None`` when there is one."""

    def ask_subsequent(self, action: str, fields: dict[str, str]) -> SubsequentResult:
        """The text judge's S on the action's subsequent prompt filled with ``fields``."""


class NoJudges:
    """The offline default: judged stages are NOT_JUDGED, rule-decided ones still decided."""

    def missing_text_judge(self) -> str:
        return "no text judge configured (--duplexact-judge)"

    def ask_subsequent(self, action: str, fields: dict[str, str]) -> SubsequentResult:
        raise AssertionError("scoring asks a judge only when missing_text_judge() is None")

    def backchannel_stages(self, instance: Instance, timeline: Timeline, candidate: Segment,
                           candidate_audio: Any) -> tuple[Judgement, Judgement]:
        return Judgement(), Judgement()


@dataclass(frozen=True)
class Score:
    immediate: ImmediateResult
    subsequent: SubsequentResult | None
    timing: float | None


def subsequent(instance: Instance, tl: Timeline, immediate: ImmediateResult | None,
               judges: Judges | None = None) -> SubsequentResult:
    """S for one trial: what the action's rule decides itself, else the text judge on the
    paper's prompt with the fields the rule builds (rules/<action>.py)."""
    if immediate is None or not immediate.success:
        return SubsequentResult(Verdict.NOT_APPLICABLE, "immediate execution did not succeed")
    judges = judges if judges is not None else NoJudges()
    rule, trial = RULES[instance.action], Trial(instance, tl)
    decided = rule.subsequent(trial, immediate)
    if decided is not None:
        return decided
    missing = judges.missing_text_judge()
    if missing is not None:
        return SubsequentResult(Verdict.NOT_JUDGED, missing)
    fields = rule.judge_fields(trial, immediate)
    # The paper decides some without asking: no later speech is a failure (B.2, B.7).
    decided = rule.without_judge(fields)
    if decided is not None:
        return decided
    return judges.ask_subsequent(instance.action, fields)


def score(instance: Instance, tl: Timeline, judges: Judges | None = None,
          audio_of: Callable[[Segment], Any] | None = None) -> Score:
    """``judges``: a ``Judges`` (judges.JudgePanel; default ``NoJudges()``, so judged stages
    are NOT_JUDGED); ``audio_of``: a segment's samples, for the backchannel audio judge. The
    immediate result carries its borderline flips (borderline.py), the judges not asked
    again."""
    judges = judges if judges is not None else NoJudges()
    rule, trial = RULES[instance.action], Trial(instance, tl, audio_of)
    recorder = borderline.Recorder(judges, tl)
    imm = rule.immediate(trial, recorder)
    imm = replace(imm, borderline=borderline.flips(rule, trial, imm, recorder.answers))
    if not imm.success:
        return Score(imm, None, None)
    return Score(imm, subsequent(instance, tl, imm, judges), rule.timing(trial, imm))
