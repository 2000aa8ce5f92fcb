"""Structured outcomes of the two evaluation stages (plain data, JSON-serialisable)."""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from . import taxonomy


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
    onset: float | None = None  # the qualifying onset, or the one a failure's reason names
    evidence: dict[str, Any] = field(default_factory=dict)
    # the perturbations that flip a counted verdict (rules/borderline.py; ``flip_text``):
    # () when none does, None when not computed (an uncounted verdict, an older outcome).
    # Stored beside the stages, as the outcome's own "borderline" (InstanceOutcome.to_dict),
    # so a release that predates it still reads the outcome.
    borderline: tuple[dict, ...] | None = None

    @property
    def success(self) -> bool:
        return self.verdict is Verdict.SUCCESS

    @property
    def is_borderline(self) -> bool:
        return bool(self.borderline)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        del d["borderline"]  # the outcome's own key (InstanceOutcome.to_dict)
        return d


# A borderline flip's keys (rules/borderline.py): which edge ("onset", "offset", "edge" for
# a raw VAD edge that is both, "words"), where (its time, s), the shift (s, or +-1 word), the
# model segment's index in the timeline (None: a raw speech edge only), and the verdict the
# perturbed timeline gets.
FLIP_KEYS = ("edge", "at", "shift", "segment", "verdict")


def flip_text(f: dict) -> str:
    """``onset at 3.41 s moved -0.10 s -> failure``; ``segment 2 (3.41 s) read as 4 words
    -> success``."""
    if f.get("edge") == "words":
        n = f.get("words")
        said = f"{n + f['shift']} words instead of {n}" if isinstance(n, int) else \
            f"{f['shift']:+d} word"
        return f"segment {f.get('segment')} ({f['at']:.2f} s) read as {said} -> {f['verdict']}"
    return f"{f['edge']} at {f['at']:.2f} s moved {f['shift']:+.2f} s -> {f['verdict']}"


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


# a wall-clock trial's lateness fields in ``InstanceOutcome.clock`` (pipelines/clock.py)
LAG_KEYS = ("input_lag_max_ms", "output_lag_max_ms", "loop_stall_max_ms")


def worst_lag_ms(clock: dict) -> float:
    """The largest of a ``clock`` dict's lateness fields (ms)."""
    return max(float(clock.get(k) or 0.0) for k in LAG_KEYS)


def over_tolerance(clock: dict | None, tolerance_ms: float | None) -> bool:
    """A trial's ``clock`` is over ``tolerance_ms`` (None: no tolerance, never over): such a
    trial is never scored, whatever tolerance it ran under (a resume, a merge)."""
    return clock is not None and tolerance_ms is not None and \
        worst_lag_ms(clock) > tolerance_ms


def success(reason: str, **kw) -> ImmediateResult:
    return ImmediateResult(Verdict.SUCCESS, reason, **kw)


def failure(reason: str, **kw) -> ImmediateResult:
    return ImmediateResult(Verdict.FAILURE, reason, **kw)


@dataclass(frozen=True)
class InstanceOutcome:
    """Everything measured for one instance; rides on its pytest report and is the unit the
    aggregation and the JSON report are built from.

    ``error`` is set when the harness or the model adapter crashed: such an instance is an
    error, never a failed instance, and enters no rate."""

    id: str
    action: str
    condition: str
    scenario: str
    source: str
    immediate: ImmediateResult | None = None
    subsequent: SubsequentResult | None = None
    timing: float | None = None  # the action's diagnostic (taxonomy.TIMING_DIAGNOSTIC)
    error: str | None = None
    recording: str | None = None  # run-dir relative folder of the artifacts
    corpus: str | None = None  # the instance's corpus when its data names one
    # a wall-clock trial's own lateness (pipelines/clock.py): input_lag_max_ms,
    # output_lag_max_ms, loop_stall_max_ms, tolerance_ms, reruns, unreliable; None stepped
    clock: dict | None = None
    # the onset latency of an action timed by its onset rather than a diagnostic (take_turn:
    # after the user's end; backchannel: after the backchannel point): rules/trial_latency.py
    latency: float | None = None
    # whether the model produced any substantive speech in the instance (None: not measured)
    responded: bool | None = None

    @property
    def unreliable(self) -> bool:
        """Its timing stayed over the tolerance after every re-run (an error)."""
        return bool(self.clock and self.clock.get("unreliable"))

    @property
    def excluded(self) -> bool:
        return self.immediate is not None and self.immediate.verdict is Verdict.EXCLUDED

    def to_dict(self) -> dict:
        return {
            "id": self.id, "action": self.action, "condition": self.condition,
            "scenario": self.scenario, "source": self.source,
            "immediate": self.immediate.to_dict() if self.immediate else None,
            "subsequent": self.subsequent.to_dict() if self.subsequent else None,
            "timing": self.timing, "error": self.error, "recording": self.recording,
            # only when known, so reports of data without corpora keep their bytes
            **({"corpus": self.corpus} if self.corpus is not None else {}),
            # only for wall-clock trials, so stepped runs keep their bytes
            **({"clock": dict(self.clock)} if self.clock is not None else {}),
            # only where computed (a counted immediate verdict)
            **({"borderline": [dict(f) for f in self.immediate.borderline]}
               if self.immediate is not None and self.immediate.borderline is not None
               else {}),
            **({"latency": self.latency} if self.latency is not None else {}),
            **({"responded": self.responded} if self.responded is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "InstanceOutcome":
        def imm(x):
            if x is None:
                return None
            x = dict(x)
            x["verdict"] = Verdict(x["verdict"])
            if x.get("window") is not None:
                x["window"] = tuple(x["window"])
            if d.get("borderline") is not None:
                x["borderline"] = tuple(dict(f) for f in d["borderline"])
            return ImmediateResult(**x)

        def sub(x):
            if x is None:
                return None
            x = dict(x)
            x["verdict"] = Verdict(x["verdict"])
            return SubsequentResult(**x)

        return cls(d["id"], d["action"], d["condition"], d["scenario"], d["source"],
                   imm(d.get("immediate")), sub(d.get("subsequent")), d.get("timing"),
                   d.get("error"), d.get("recording"), d.get("corpus"), d.get("clock"),
                   d.get("latency"), d.get("responded"))


# --- reading outcomes back (resume, merge): trust nothing ---------------------------------

_VERDICTS = {v.value for v in Verdict}


def finite_number(x) -> bool:
    """A real int or float (not a bool), neither NaN nor infinite; an int too large for a
    float is not (math.isfinite would raise OverflowError on it)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return math.isfinite(x) if isinstance(x, float) else abs(x) <= sys.float_info.max


def _stage_problem(x, name: str, extra: dict) -> str | None:
    if x is None:
        return None
    if not isinstance(x, dict):
        return f"'{name}' is not an object"
    if x.get("verdict") not in _VERDICTS:
        return f"'{name}.verdict' is {x.get('verdict')!r}, not one of {sorted(_VERDICTS)}"
    if not isinstance(x.get("reason"), str):
        return f"'{name}.reason' is not a string"
    if not isinstance(x.get("evidence", {}), dict):
        return f"'{name}.evidence' is not an object"
    for key, check in extra.items():
        value = x.get(key)
        if value is not None and not check(value):
            return f"'{name}.{key}' is {value!r}"
    unknown = set(x) - {"verdict", "reason", "evidence", *extra}
    return f"'{name}' has unknown keys {sorted(unknown)}" if unknown else None


def clock_problem(c: Any) -> str | None:
    """Why a stored ``clock`` cannot be trusted, or None."""
    if not isinstance(c, dict):
        return "'clock' is not an object"
    for key, value in c.items():
        ok = isinstance(value, bool) if key == "unreliable" else (
            value is None or finite_number(value))
        if not ok:
            return f"'clock.{key}' is {value!r}"
    return None


def _flips_ok(flips: Any) -> bool:
    """A stored ``borderline`` list: objects with FLIP_KEYS of the right types."""
    def ok(f) -> bool:
        return (isinstance(f, dict) and isinstance(f.get("edge"), str)
                and finite_number(f.get("at")) and finite_number(f.get("shift"))
                and isinstance(f.get("verdict"), str) and f["verdict"] in _VERDICTS
                and (f.get("segment") is None or (isinstance(f["segment"], int)
                                                  and not isinstance(f["segment"], bool)))
                and (f.get("words") is None or (isinstance(f["words"], int)
                                                and not isinstance(f["words"], bool))))

    return isinstance(flips, (list, tuple)) and all(map(ok, flips))


def outcome_problem(d: Any) -> str | None:
    """Why a stored outcome (outcome.json, a report's instance) cannot be trusted, or None:
    every field of the right type, finite numbers, a known action and condition."""
    if not isinstance(d, dict):
        return "not a JSON object"
    for key in ("id", "action", "condition", "scenario", "source"):
        if not isinstance(d.get(key), str):
            return f"'{key}' is {d.get(key)!r}, not a string"
    if d["action"] not in taxonomy.ACTIONS:
        return f"'action' {d['action']!r} is not a DuplexAct action"
    if f"{d['action']}.{d['condition']}" not in taxonomy.CONDITIONS_BY_KEY:
        return f"'condition' {d['condition']!r} is not a condition of {d['action']}"
    for key in ("error", "recording", "corpus"):
        if d.get(key) is not None and not isinstance(d[key], str):
            return f"'{key}' is {d[key]!r}, not a string"
    if d.get("timing") is not None and not finite_number(d["timing"]):
        return f"'timing' is {d['timing']!r}, not a finite number"
    if d.get("clock") is not None and (problem := clock_problem(d["clock"])):
        return problem
    if d.get("borderline") is not None and not _flips_ok(d["borderline"]):
        return f"'borderline' is {d['borderline']!r}, not a list of flips"
    if d.get("latency") is not None and not finite_number(d["latency"]):
        return f"'latency' is {d['latency']!r}, not a finite number"
    if d.get("responded") is not None and not isinstance(d["responded"], bool):
        return f"'responded' is {d['responded']!r}, not true or false"
    def window_ok(w) -> bool:
        return isinstance(w, (list, tuple)) and len(w) == 2 and all(map(finite_number, w))

    return (_stage_problem(d.get("immediate"), "immediate",
                           {"window": window_ok, "onset": finite_number})
            or _stage_problem(d.get("subsequent"), "subsequent",
                              {"judge": lambda j: isinstance(j, str)}))
