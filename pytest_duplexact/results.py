"""Structured outcomes of the two evaluation stages (plain data, JSON-serialisable)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Verdict(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    # Stage not evaluated for a reason that is not the model's fault or merit:
    NOT_APPLICABLE = "not_applicable"  # e.g. stop whose first stop came after the intervention
    NOT_JUDGED = "not_judged"  # a judge is needed and none is configured
    JUDGE_ERROR = "judge_error"  # the judge was asked and gave no usable answer
    EXCLUDED = "excluded"  # simulator trial where the cue did not overlap model speech

    @property
    def counted(self) -> bool:
        """Enters the rate's denominator."""
        return self in (Verdict.SUCCESS, Verdict.FAILURE)


@dataclass(frozen=True)
class ImmediateResult:
    verdict: Verdict
    reason: str
    window: tuple[float, float] | None = None
    onset: float | None = None  # the qualifying onset, where the rule has one
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.verdict is Verdict.SUCCESS

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


@dataclass(frozen=True)
class SubsequentResult:
    verdict: Verdict
    reason: str
    judge: str | None = None  # "rule" or the judge model that decided
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


def success(reason: str, **kw) -> ImmediateResult:
    return ImmediateResult(Verdict.SUCCESS, reason, **kw)


def failure(reason: str, **kw) -> ImmediateResult:
    return ImmediateResult(Verdict.FAILURE, reason, **kw)
