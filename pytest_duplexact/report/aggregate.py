"""Rates over many instances (SPEC §5-§6, paper Tables 4, 15, 16 and Figure 5), as plain data.

``aggregate(outcomes)`` turns the per-instance ``InstanceOutcome`` records into counts per
condition, per action (micro-averaged: the pooled counts of its conditions, never a mean of
condition rates), per (action, scenario), per (action, source) and per source, plus the timing
diagnostics per action and per condition. docs/scoring.md states every counting rule.

Counting, per instance (a harness/model error enters no count but ``n`` and ``errors``):
- ``n_I``: immediate verdict SUCCESS or FAILURE; ``I = I_success / n_I``.
- ``n_S``: immediate SUCCESS and subsequent SUCCESS or FAILURE; ``S = S_success / n_S``.
- A rate is ``None`` (shown "n/a"), not 0, when its denominator is 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, astuple, dataclass, field, fields
from typing import Iterable

import numpy as np

from ..data import taxonomy
from ..data.results import InstanceOutcome, Verdict

_COUNTED = (Verdict.SUCCESS, Verdict.FAILURE)
# Where a stage's verdict goes when it enters no rate (EXCLUDED is an immediate-only verdict).
_UNCOUNTED = {Verdict.EXCLUDED: "excluded", Verdict.NOT_JUDGED: "not_judged",
              Verdict.JUDGE_ERROR: "judge_errors", Verdict.NOT_APPLICABLE: "not_applicable"}


def _tally(c: dict, stage: str, v: Verdict) -> None:
    """Count one stage's verdict into ``c``: n_<stage> / <stage>_success, or its bucket."""
    if v in _COUNTED:
        c[f"n_{stage}"] = 1
        c[f"{stage}_success"] = int(v is Verdict.SUCCESS)
    elif v in _UNCOUNTED and not (stage == "S" and v is Verdict.EXCLUDED):
        c[_UNCOUNTED[v]] = 1
        if stage == "S":  # which stage it was: "2 not judged (I)" differs from "(S)"
            c[_UNCOUNTED[v] + "_S"] = 1


_LATER = ("_S", "borderline_I")  # counters a stored report may predate


@dataclass(frozen=True)
class Counts:
    """Instance counts of one group; the rates are derived, never stored."""

    n: int = 0  # instances in the group, whatever happened to them
    n_I: int = 0  # immediate verdict SUCCESS or FAILURE
    I_success: int = 0
    n_S: int = 0  # immediate SUCCESS and subsequent SUCCESS or FAILURE
    S_success: int = 0
    excluded: int = 0  # immediate EXCLUDED (cue did not meet model speech)
    errors: int = 0  # InstanceOutcome.error set: harness or model crash
    not_judged: int = 0  # a stage needed a judge and had none (or was never evaluated)
    judge_errors: int = 0  # a judge was asked and gave no usable answer
    not_applicable: int = 0  # immediate NOT_APPLICABLE, or S not applicable after I success
    # the subsequent stage's share of the three above (the rest is the immediate stage's)
    not_judged_S: int = 0
    judge_errors_S: int = 0
    not_applicable_S: int = 0
    # counted immediate verdicts an edge error or one word at the 3-word line would flip
    # (rules/borderline.py); a report before it has no key, and its views show none
    borderline_I: int = 0

    @property
    def I(self) -> float | None:  # noqa: E743 - the paper's name
        return self.I_success / self.n_I if self.n_I else None

    @property
    def S(self) -> float | None:
        return self.S_success / self.n_S if self.n_S else None

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other))))

    @classmethod
    def of(cls, o: InstanceOutcome) -> "Counts":
        """The counts one instance contributes."""
        if o.error is not None:
            return cls(n=1, errors=1)
        imm, sub = o.immediate, o.subsequent
        if imm is None:
            raise ValueError(f"instance {o.id}: outcome has neither an immediate result nor "
                             "an error")
        c = dict(n=1)
        _tally(c, "I", imm.verdict)
        if imm.verdict in _COUNTED and imm.is_borderline:
            c["borderline_I"] = 1
        if imm.verdict is Verdict.SUCCESS:
            # an immediate success with no subsequent result was never judged
            _tally(c, "S", sub.verdict if sub is not None else Verdict.NOT_JUDGED)
        return cls(**c)

    def to_dict(self) -> dict:
        return {**asdict(self), "I": self.I, "S": self.S}

    @classmethod
    def from_dict(cls, d: dict) -> "Counts":
        # a report written before the stage split has no *_S keys, one before borderline
        # verdicts no borderline_I
        return cls(**{f.name: int(d[f.name] if f.name in d or not f.name.endswith(_LATER)
                                  else 0) for f in fields(cls)})


@dataclass(frozen=True)
class Timing:
    """A timing diagnostic as the paper reports it: median (IQR, n), in seconds.

    Percentiles use numpy's default (linear interpolation between order statistics). The IQR
    of a single value is ``None`` ("n/a" in Table 15), as are all statistics of no values."""

    n: int = 0
    median: float | None = None
    p25: float | None = None
    p75: float | None = None

    @property
    def iqr(self) -> float | None:
        return self.p75 - self.p25 if self.n >= 2 else None

    @classmethod
    def of(cls, values: Iterable[float]) -> "Timing":
        x = np.asarray(list(values), dtype=float)
        if x.size == 0:
            return cls()
        p25, med, p75 = (float(v) for v in np.percentile(x, [25, 50, 75]))
        return cls(int(x.size), med, p25, p75)

    def to_dict(self) -> dict:
        return {**asdict(self), "iqr": self.iqr}

    @classmethod
    def from_dict(cls, d: dict) -> "Timing":
        return cls(int(d["n"]), d["median"], d["p25"], d["p75"])


@dataclass(frozen=True)
class Latency:
    """A timed measure as a distribution: p10 / p50 / p90 (numpy's linear percentiles) of its
    ``n`` values in seconds, and the no-response rate: of the ``trials`` scored (errors
    excluded), the ``silent`` ones in which the model produced no substantive speech at all,
    which have no latency and are counted here rather than as late."""

    n: int = 0
    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    trials: int = 0
    silent: int = 0

    @property
    def no_response(self) -> float | None:
        return self.silent / self.trials if self.trials else None

    @classmethod
    def of(cls, values: Iterable[float], trials: int = 0, silent: int = 0) -> "Latency":
        x = np.asarray(list(values), dtype=float)
        if x.size == 0:
            return cls(trials=trials, silent=silent)
        p10, p50, p90 = (round(float(v), 6) for v in np.percentile(x, [10, 50, 90]))
        return cls(int(x.size), p10, p50, p90, trials, silent)

    def to_dict(self) -> dict:
        return {**asdict(self), "no_response": self.no_response}

    @classmethod
    def from_dict(cls, d: dict) -> "Latency":
        return cls(int(d["n"]), d["p10"], d["p50"], d["p90"], int(d["trials"]),
                   int(d["silent"]))


def latency_value(o: InstanceOutcome) -> float | None:
    """The trial's latency: its action's diagnostic, else its onset latency
    (rules/trial_latency.py)."""
    return o.timing if o.action in taxonomy.TIMING_DIAGNOSTIC else o.latency


@dataclass(frozen=True)
class ActionAggregate:
    """One action: pooled counts and its breakdowns, each keyed in taxonomy order.

    ``timing`` is the action's diagnostic pooled over its conditions (Table 4's T), ``None``
    for actions without one; ``condition_timings`` the per-condition cells of Table 15."""

    action: str
    counts: Counts
    conditions: dict[str, Counts] = field(default_factory=dict)
    scenarios: dict[str, Counts] = field(default_factory=dict)
    sources: dict[str, Counts] = field(default_factory=dict)
    timing: Timing | None = None
    condition_timings: dict[str, Timing] = field(default_factory=dict)
    corpora: dict[str, Counts] = field(default_factory=dict)  # only data that names corpora
    # latency as a distribution and the no-response rate, pooled and per condition
    latency: Latency | None = None
    condition_latency: dict[str, Latency] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "counts": self.counts.to_dict(),
            "conditions": {k: c.to_dict() for k, c in self.conditions.items()},
            "scenarios": {k: c.to_dict() for k, c in self.scenarios.items()},
            "sources": {k: c.to_dict() for k, c in self.sources.items()},
            "timing": self.timing.to_dict() if self.timing is not None else None,
            "condition_timings": {k: t.to_dict() for k, t in self.condition_timings.items()},
            **({"corpora": {k: c.to_dict() for k, c in self.corpora.items()}}
               if self.corpora else {}),  # only data that names corpora: others keep bytes
            **({"latency": self.latency.to_dict(),
                "condition_latency": {k: v.to_dict() for k, v in self.condition_latency.items()}}
               if self.latency is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ActionAggregate":
        def counts(m):
            return {k: Counts.from_dict(v) for k, v in m.items()}

        return cls(d["action"], Counts.from_dict(d["counts"]), counts(d["conditions"]),
                   counts(d["scenarios"]), counts(d["sources"]),
                   Timing.from_dict(d["timing"]) if d.get("timing") is not None else None,
                   {k: Timing.from_dict(v) for k, v in d["condition_timings"].items()},
                   counts(d.get("corpora", {})),
                   Latency.from_dict(d["latency"]) if d.get("latency") is not None else None,
                   {k: Latency.from_dict(v) for k, v in d.get("condition_latency", {}).items()})


@dataclass(frozen=True)
class Aggregate:
    """The whole run. ``actions`` holds only actions with at least one instance, in
    taxonomy.ACTIONS order; ``sources`` pools every action per source (taxonomy.SOURCES)."""

    total: Counts
    actions: dict[str, ActionAggregate]
    sources: dict[str, Counts]
    # per corpus (taxonomy.CORPORA order), pooled over actions; present in the JSON only when
    # some instance names its corpus (the released data), so other reports keep their bytes
    corpora: dict[str, Counts] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "total": self.total.to_dict(),
            "actions": {a: x.to_dict() for a, x in self.actions.items()},
            "sources": {s: c.to_dict() for s, c in self.sources.items()},
            **({"corpora": {k: c.to_dict() for k, c in self.corpora.items()}}
               if self.corpora else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Aggregate":
        return cls(Counts.from_dict(d["total"]),
                   {a: ActionAggregate.from_dict(x) for a, x in d["actions"].items()},
                   {s: Counts.from_dict(c) for s, c in d["sources"].items()},
                   {k: Counts.from_dict(c) for k, c in d.get("corpora", {}).items()})


def _check(o: InstanceOutcome) -> None:
    if o.action not in taxonomy.ACTIONS:
        raise ValueError(f"instance {o.id}: unknown action {o.action!r}; known: "
                         f"{', '.join(taxonomy.ACTIONS)}")
    try:
        taxonomy.condition(o.action, o.condition)
    except KeyError as e:
        raise ValueError(f"instance {o.id}: {e.args[0]}") from None
    if o.scenario not in taxonomy.SCENARIOS:
        raise ValueError(f"instance {o.id}: unknown scenario {o.scenario!r}; known: "
                         f"{', '.join(taxonomy.SCENARIOS)}")
    if o.source not in taxonomy.SOURCES:
        raise ValueError(f"instance {o.id}: unknown source {o.source!r}; known: "
                         f"{', '.join(taxonomy.SOURCES)}")
    if o.corpus is not None and o.corpus not in taxonomy.CORPORA:
        raise ValueError(f"instance {o.id}: unknown corpus {o.corpus!r}; known: "
                         f"{', '.join(taxonomy.CORPORA)}")
    if o.timing is not None and not math.isfinite(o.timing):
        raise ValueError(f"instance {o.id}: timing must be a finite number of seconds, got "
                         f"{o.timing!r}")


def _pooled(groups: dict[str, list[Counts]], order: Iterable[str]) -> dict[str, Counts]:
    return {k: sum(groups[k], Counts()) for k in order if k in groups}


def aggregate(outcomes: Iterable[InstanceOutcome]) -> Aggregate:
    """Pool per-instance outcomes into the report's counts. Raises ValueError naming the
    instance for an unknown action / condition / scenario / source, a duplicated instance id,
    or an outcome with neither a result nor an error."""
    per: dict[tuple, list[Counts]] = {}
    times: dict[tuple[str, str], list[float]] = {}
    lats: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
    seen: set[str] = set()
    for o in outcomes:
        _check(o)
        if o.id in seen:
            raise ValueError(f"instance {o.id}: appears more than once; each instance is "
                             "counted once")
        seen.add(o.id)
        c = Counts.of(o)
        for key in (("cond", o.action, o.condition), ("scen", o.action, o.scenario),
                    ("src", o.action, o.source), ("source", o.source)):
            per.setdefault(key, []).append(c)
        if o.corpus is not None:
            for key in (("corp", o.action, o.corpus), ("corpus", o.corpus)):
                per.setdefault(key, []).append(c)
        if o.error is None and o.timing is not None:
            times.setdefault((o.action, o.condition), []).append(float(o.timing))
        if o.error is None and not o.excluded:
            lat = lats.setdefault((o.action, o.condition), ([], [0, 0]))
            if (v := latency_value(o)) is not None:
                lat[0].append(float(v))
            if o.responded is not None:
                lat[1][0] += 1
                lat[1][1] += not o.responded

    actions: dict[str, ActionAggregate] = {}
    for action in taxonomy.ACTIONS:
        conds = [c.id for c in taxonomy.conditions_of(action)]
        by_cond = _pooled({k[2]: v for k, v in per.items() if k[:2] == ("cond", action)}, conds)
        if not by_cond:
            continue
        timed = action in taxonomy.TIMING_DIAGNOSTIC
        actions[action] = ActionAggregate(
            action=action,
            counts=sum(by_cond.values(), Counts()),  # micro-average: pooled counts
            conditions=by_cond,
            scenarios=_pooled({k[2]: v for k, v in per.items() if k[:2] == ("scen", action)},
                              taxonomy.SCENARIOS),
            sources=_pooled({k[2]: v for k, v in per.items() if k[:2] == ("src", action)},
                            taxonomy.SOURCES),
            timing=Timing.of(v for cid in conds for v in times.get((action, cid), []))
            if timed else None,
            condition_timings={cid: Timing.of(times.get((action, cid), []))
                               for cid in by_cond} if timed else {},
            corpora=_pooled({k[2]: v for k, v in per.items() if k[:2] == ("corp", action)},
                            taxonomy.CORPORA),
            **_latencies(action, list(by_cond), lats),
        )
    sources = _pooled({k[1]: v for k, v in per.items() if k[0] == "source"}, taxonomy.SOURCES)
    total = sum((a.counts for a in actions.values()), Counts())
    corpora = _pooled({k[1]: v for k, v in per.items() if k[0] == "corpus"}, taxonomy.CORPORA)
    return Aggregate(total, actions, sources, corpora)


def _latencies(action: str, conds: list[str], lats: dict) -> dict:
    """The action's latency fields, present once some trial of it says whether the model
    responded (outcomes stored before these fields existed do not: their report keeps its
    bytes)."""
    mine = {c: lats[(action, c)] for c in conds if (action, c) in lats}
    if not any(n[0] for _, n in mine.values()):
        return {}

    def of(groups) -> Latency:
        return Latency.of((v for vals, _ in groups for v in vals),
                          sum(n[0] for _, n in groups), sum(n[1] for _, n in groups))

    return {"latency": of(list(mine.values())),
            "condition_latency": {c: of([g]) for c, g in mine.items()}}


# --- Presentation: the paper's cells ---------------------------------------------------------

NA = "n/a"


def format_rate(rate: float | None, digits: int = 1) -> str:
    """A rate as a percentage ("81.5"), or "n/a" when nothing was measured."""
    return NA if rate is None else f"{100.0 * rate:.{digits}f}"


def format_cell(c: Counts, digits: int = 1) -> str:
    """Table 16's cell "I / S (n_S)", e.g. "81.5 / 42.3 (163)"; "0.0 / n/a" when no instance
    entered subsequent evaluation."""
    s = format_rate(c.S, digits)
    tail = f" ({c.n_S})" if c.S is not None else ""
    return f"{format_rate(c.I, digits)} / {s}{tail}"


def format_timing(t: Timing | None, digits: int = 2) -> str:
    """Table 15's cell "median (IQR, n)", e.g. "0.96 (1.97, 96)"; "0.09 (n/a, 1)"; "n/a"."""
    if t is None or t.n == 0:
        return NA
    iqr = NA if t.iqr is None else f"{t.iqr:.{digits}f}"
    return f"{t.median:.{digits}f} ({iqr}, {t.n})"


def format_action_cell(c: Counts, timing: Timing | None = None, digits: int = 1) -> str:
    """Table 4's cell: "I / S", or "I / T / S" for an action with a timing diagnostic (pass
    its ``ActionAggregate.timing``), T being the median in seconds."""
    i, s = format_rate(c.I, digits), format_rate(c.S, digits)
    if timing is None:
        return f"{i} / {s}"
    t = NA if timing.n == 0 else f"{timing.median:.2f}"
    return f"{i} / {t} / {s}"
