"""Scores one trial: (instance, timeline[, judges]) -> immediate, subsequent, timing.

The action's rule (``rules.RULES``) decides; this module only looks it up, hands it the judge
panel, and enforces the two-stage order (subsequent only after immediate success, SPEC §4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..data.annotations import Instance
from ..data.results import ImmediateResult, SubsequentResult
from ..data.timeline import Segment, Timeline
from . import RULES, Trial


@dataclass(frozen=True)
class Score:
    immediate: ImmediateResult
    subsequent: SubsequentResult | None
    timing: float | None


def score(instance: Instance, tl: Timeline, panel=None,
          audio_of: Callable[[Segment], Any] | None = None) -> Score:
    """``panel``: a judges.JudgePanel (default: one without judges, so judged stages are
    NOT_JUDGED); ``audio_of``: a segment's samples, for the backchannel audio judge."""
    if panel is None:
        from ..judges.panel import JudgePanel

        panel = JudgePanel()
    rule, trial = RULES[instance.action], Trial(instance, tl, audio_of)
    imm = rule.immediate(trial, panel)
    if not imm.success:
        return Score(imm, None, None)
    return Score(imm, panel.subsequent(instance, tl, imm), rule.timing(trial, imm))
