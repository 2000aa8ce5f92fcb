"""The action as the unit of scoring: one ``ActionRule`` object per action (rules/<action>.py),
and the ``Trial`` it scores.

An ActionRule says everything the rest of the package needs to know about its action: what it
requires of an instance (the loader checks it), how immediate execution is decided, which part
of subsequent follow-through a rule decides without a judge, the timing diagnostic (from the
immediate result's onset, so nothing is decided twice) and the fields of the judge prompt.
Everything else about the action (label, conditions, timing name, prompt id, oracle clips, ...)
is its ``taxonomy.ActionRecord``, ``RULE.record``. Adding an action: docs/architecture.md,
"Adding an action". scoring.py and the judge panel look the rule up (``rules.RULES``); the
loader is given the requirements (``rules.requires``).

Plain data in, plain data out: no audio library, no I/O. The candidate audio the backchannel
audio judge hears comes through ``Trial.audio_of``, a callable the harness supplies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ..data.annotations import Annotations, Instance, Requirements
from ..data.results import ImmediateResult, SubsequentResult
from ..data.taxonomy import RECORDS, ActionRecord
from ..data.timeline import Segment, Timeline

# What every Simulator Replay instance carries (stop, hold_floor, recover): the lead-in that
# elicits the model's answer, the cue played into it, and the texts the simulator and judges
# read.
SIMULATOR_REPLAY = Requirements(clips=("lead_in", "cue"), annotations=("cue_start", "cue_end"),
                                texts=("cue", "reference"))


@dataclass(frozen=True)
class Trial:
    """One scored trial: the instance, the model timeline, and access to the model's audio
    (``audio_of(segment)`` -> the segment's samples at 16 kHz; absent when scoring from
    timelines alone, e.g. in the rule tests)."""

    instance: Instance
    timeline: Timeline
    audio_of: Callable[[Segment], Any] | None = field(default=None, compare=False)

    @property
    def annotations(self) -> Annotations:
        return self.instance.annotations

    @property
    def condition(self) -> str:
        return self.instance.condition


class Judges(Protocol):
    """What a rule may ask of the judges during immediate execution (judges.JudgePanel)."""

    def backchannel_stages(self, instance: Instance, timeline: Timeline, candidate: Segment,
                           candidate_audio: Any): ...


class ActionRule(Protocol):
    action: str
    record: ActionRecord  # everything about the action that is not this logic (taxonomy.py)

    def requires(self, condition: str) -> Requirements:
        """What an instance of ``condition`` must carry."""

    def immediate(self, trial: Trial, judges: Judges) -> ImmediateResult:
        """I: did the expected action happen at the right moment?"""

    def subsequent(self, trial: Trial, immediate: ImmediateResult) -> SubsequentResult | None:
        """The part of S a rule decides whatever the judges (stop's rule; not applicable),
        given an immediate success; ``None``: the text judge decides."""

    def judge_fields(self, trial: Trial, immediate: ImmediateResult) -> dict[str, str]:
        """The fields of the action's subsequent prompt (judges/prompts.py)."""

    def without_judge(self, fields: dict[str, str]) -> SubsequentResult | None:
        """What the paper decides without asking once the fields are known (no later speech
        is a failure); ``None``: ask the judge."""

    def timing(self, trial: Trial, immediate: ImmediateResult) -> float | None:
        """The action's timing diagnostic (its record's ``timing``) on an immediate success,
        from its onset; ``None`` for actions without one."""


class Rule:
    """Defaults shared by the ActionRule objects: no rule-decided S, no decision from the
    fields alone, no timing diagnostic, no judge prompt."""

    action: str = ""
    _requirements: Requirements

    @property
    def record(self) -> ActionRecord:
        return RECORDS[self.action]

    def requires(self, condition: str) -> Requirements:
        return self._requirements

    def subsequent(self, trial: Trial, immediate: ImmediateResult) -> SubsequentResult | None:
        return None

    def judge_fields(self, trial: Trial, immediate: ImmediateResult) -> dict[str, str]:
        raise NotImplementedError(f"{self.action} has no judge prompt")

    def without_judge(self, fields: dict[str, str]) -> SubsequentResult | None:
        return None

    def timing(self, trial: Trial, immediate: ImmediateResult) -> float | None:
        return None

    def __repr__(self) -> str:
        return f"<ActionRule {self.action}>"
