"""Scores one trial: (instance, timeline[, judges]) -> immediate, subsequent, timing.

The rules in ``rules/`` decide; this module only routes each action to its rule, asks the
judge panel for the stages that need a judge, and enforces the two-stage order (subsequent
only after immediate success, SPEC §4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from .instance import Instance
from .results import ImmediateResult, SubsequentResult, Verdict
from .rules import RULES, backchannel, hold_floor, interrupt, recover, stop
from .timeline import Segment, Timeline


class Panel(Protocol):
    """What scoring needs from the judges (judges.JudgePanel implements it)."""

    def subsequent(self, instance: Instance, timeline: Timeline,
                   immediate: ImmediateResult) -> SubsequentResult: ...

    def backchannel_stages(self, instance: Instance, timeline: Timeline, candidate: Segment,
                           candidate_audio: np.ndarray): ...


class NoJudges:
    """The offline default: every judged stage is NOT_JUDGED, rule-only stages still run."""

    def subsequent(self, instance, timeline, immediate) -> SubsequentResult:
        if instance.action == "stop":
            return stop.subsequent(instance.annotations, timeline)
        if instance.action == "hold_floor" and not hold_floor.has_speech_after_cue(timeline):
            return SubsequentResult(Verdict.NOT_APPLICABLE, "no model speech after the cue")
        return SubsequentResult(Verdict.NOT_JUDGED, "no text judge configured "
                                "(--duplexact-judge)")

    def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
        return None, None


@dataclass(frozen=True)
class Score:
    immediate: ImmediateResult
    subsequent: SubsequentResult | None
    timing: float | None


def immediate(instance: Instance, tl: Timeline, panel: Panel,
              audio_of: Callable[[Segment], np.ndarray] | None = None) -> ImmediateResult:
    ann, action, cond = instance.annotations, instance.action, instance.condition
    rule = RULES[action]
    if action in ("wait", "take_turn"):
        return rule.immediate(ann, tl, cond)
    if action == "backchannel":
        cand = backchannel.candidate(ann, tl)
        if cand is None:
            return backchannel.immediate(ann, tl, cond)
        audio = audio_of(cand) if audio_of is not None else np.zeros(0, np.float32)
        genuine, function = panel.backchannel_stages(instance, tl, cand, audio)
        return backchannel.immediate(ann, tl, cond, genuine, function)
    return rule.immediate(ann, tl)


def timing(instance: Instance, tl: Timeline) -> float | None:
    """The action's diagnostic (SPEC §5), on immediate successes only."""
    ann = instance.annotations
    if instance.action == "stop":
        return stop.yield_latency(ann, tl)
    if instance.action == "interrupt":
        return interrupt.timing_difference(ann, tl)
    if instance.action == "recover":
        return recover.recovery_latency(ann, tl)
    return None


def score(instance: Instance, tl: Timeline, panel: Panel | None = None,
          audio_of: Callable[[Segment], np.ndarray] | None = None) -> Score:
    panel = panel or NoJudges()
    imm = immediate(instance, tl, panel, audio_of)
    if not imm.success:
        return Score(imm, None, None)
    sub = panel.subsequent(instance, tl, imm)
    return Score(imm, sub, timing(instance, tl))
