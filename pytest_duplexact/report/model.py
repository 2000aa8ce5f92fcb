"""The report as a typed, versioned object: ``Report`` is what report.json holds, and ``build``
is the one function that makes a run's final report from its outcomes and settings (plus the
run-wide sections: usage, judges, cost, the paper side by side, gates, notes, the estimate,
the budget, the baseline, the shards). The plugin (``pytest_plugin/session.py`` ``finish``)
and ``duplexact merge`` both call ``build`` (report/builder.py), so a merged report has every
section the unsharded run's has, built the same way.

Versioned the way inspect_ai versions its EvalLog: ``SCHEMA`` and ``VERSION`` are the file's
own ``schema`` / ``version`` keys (``version`` bumps on any incompatible change; readers
refuse other versions, ``read_report``). ``Report.from_json`` reads a stored report, older
ones without the later sections included (an absent section is ``None``); ``to_json`` writes
exactly the dict the report has always been, key for key in the same order, so report.json
keeps its bytes. Keys this release does not know are kept (``other``) and written back after
the known ones.

Every view, merge, the baseline gate and ``duplexact compare`` read the typed fields
(``report.totals.errors``, ``report.summary.counts(a, c)``), a stored report parsed once where
it is read (``Report.from_json``, after ``read_report``'s checks); no function takes a report
dict. No module of the package indexes a report by key any more, but
the estimate (``estimate.plan``'s ``previous``: an unchecked store entry with its ``_name``,
read leniently for its usage and instance count). A ``Report`` stays a read-only mapping over
its JSON form (``report["totals"]["errors"]``) for callers outside it that index it as a
mapping (a conftest's ``pytest_duplexact_report`` written against report.json's shape;
tests/report/test_model.py holds it).

The nested sections whose shape other modules own (settings: run/settings.py; summary:
aggregate.py; usage, cost, estimate, baseline ...) are carried as the JSON they are, so a
report read back is written back unchanged, whatever release wrote it; ``Summary`` adds
typed access to the counts (per action, condition, scenario, corpus) and timings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

SCHEMA = "duplexact-report"
VERSION = 1  # the report's schema version: its "version" key

# every key a report may have, in the order report.json has them; each is a Report field
KEYS = ("schema", "version", "created", "generator", "model", "settings", "taxonomy", "totals",
        "summary", "instances", "selected", "gates", "incomplete", "notes", "usage", "clock",
        "judges",
        "cost", "paper_comparison", "estimate", "measured", "budget", "baseline", "robustness",
        "run_dir",
        "shards", "extra")


@dataclass(frozen=True)
class Totals:
    instances: int
    errors: int

    def to_json(self) -> dict:
        return {"instances": self.instances, "errors": self.errors}

    @classmethod
    def from_json(cls, d: Mapping) -> "Totals":
        return cls(d["instances"], d["errors"])


@dataclass(frozen=True)
class Summary:
    """The report's ``summary`` (aggregate.Aggregate.to_dict) with typed access. Carried as
    stored: a report older than a counter (``not_judged_S``) keeps its bytes."""

    data: Mapping

    @property
    def actions(self) -> Mapping:
        return self.data["actions"]

    @property
    def corpora(self) -> Mapping:
        """Counts per corpus; empty for data whose instances name no corpus."""
        return self.data.get("corpora") or {}

    def action(self, action: str) -> Mapping | None:
        return self.actions.get(action)

    def counts(self, action: str, condition: str | None = None) -> Mapping | None:
        """The action's Counts (pooled over its conditions), or a condition's; None when it
        did not run."""
        a = self.action(action)
        if a is None:
            return None
        return a["counts"] if condition is None else self.conditions(action).get(condition)

    def conditions(self, action: str) -> Mapping:
        """The action's Counts per condition id, in the stored order; empty when it did not
        run."""
        a = self.action(action)
        return (a.get("conditions") if a else None) or {}

    def scenarios(self, action: str) -> Mapping:
        """The action's Counts per scenario (Figure 5); empty when it did not run."""
        a = self.action(action)
        return (a.get("scenarios") if a else None) or {}

    def timing(self, action: str, condition: str | None = None) -> Mapping | None:
        """The action's timing (aggregate.Timing.to_dict), or a condition's; None when it has
        none (an untimed action, or one that did not run)."""
        return self._pooled_or_per_condition(action, condition, "timing", "condition_timings")

    def latency(self, action: str, condition: str | None = None) -> Mapping | None:
        """The action's latency distribution and no-response rate (aggregate.Latency.to_dict),
        or a condition's; None when not measured (a report from before they existed)."""
        return self._pooled_or_per_condition(action, condition, "latency", "condition_latency")

    def _pooled_or_per_condition(self, action: str, condition: str | None, pooled: str,
                                 per_condition: str) -> Mapping | None:
        a = self.action(action)
        if a is None:
            return None
        if condition is None:
            return a.get(pooled)
        return (a.get(per_condition) or {}).get(condition)

    def corpus_counts(self, action: str, corpus: str) -> Mapping | None:
        return self.actions[action].get("corpora", {}).get(corpus)

    def to_json(self) -> Mapping:
        return self.data


@dataclass(frozen=True)
class StoredGate:
    """One gate's result as the report keeps it (gates.GateResult.to_dict: gate, target,
    passed, value, threshold, op, message), carried as stored."""

    data: Mapping

    @property
    def gate(self) -> str:
        return self.data["gate"]

    @property
    def passed(self) -> bool:
        return self.data["passed"]

    @property
    def value(self) -> float | None:
        return self.data.get("value")

    @property
    def message(self) -> str:
        return self.data["message"]

    def to_json(self) -> Mapping:
        return self.data

    @classmethod
    def from_json(cls, d: Mapping) -> "StoredGate":
        return cls(d)


@dataclass(frozen=True)
class Measured:
    """What this invocation measured, beside its estimate (volatile: ``VOLATILE_KEYS``)."""

    wall_s: float
    instances: int
    # streaming trials in flight (run/admission.py concurrency_measured): requested per
    # process, sustained p50 / min; the loop's CPU per second streamed. None: not measured
    concurrency: Mapping | None = None
    loop_cpu_ms_per_stream_s: float | None = None


def _tuple(x):
    return None if x is None else tuple(x)


@dataclass(frozen=True)
class Report(Mapping):
    """report.json, docs/report-format.md. A field that is ``None`` is a section the report
    does not have (its key is absent). ``extra`` is where a ``pytest_duplexact_report`` hook
    adds its own data: written as the ``extra`` key only when not empty, so default reports
    keep their bytes."""

    schema: str | None = SCHEMA
    version: int | None = VERSION
    created: str | None = None
    generator: str | None = None
    model: str | None = None
    settings: Mapping | None = None
    taxonomy: tuple | None = None
    totals: Totals | None = None
    summary: Summary | None = None
    instances: tuple[Mapping, ...] | None = None
    selected: tuple[str, ...] | None = None
    gates: tuple[StoredGate, ...] | None = None
    incomplete: tuple[str, ...] | None = None  # a merge --allow-incomplete lacks these
    notes: tuple[str, ...] | None = None
    usage: Mapping | None = None
    # the harness's own lateness (report/sections/timing.py): streaming runs only
    clock: Mapping | None = None
    judges: Mapping | None = None
    cost: Mapping | None = None
    paper_comparison: Mapping | None = None
    estimate: Mapping | None = None
    measured: Mapping | None = None
    budget: Mapping | None = None
    baseline: Mapping | None = None
    # every channel the run store holds for this model and data (report/sections/robustness.py)
    robustness: Mapping | None = None
    run_dir: str | None = None
    shards: tuple[Mapping, ...] | None = None
    extra: dict = field(default_factory=dict)
    other: Mapping = field(default_factory=dict)  # keys of a report this release does not know

    # --- JSON ----------------------------------------------------------------------------

    def _value(self, key: str):
        """The JSON value of ``key``, or None when the report has no such section."""
        if key == "extra":
            return dict(self.extra) if self.extra else None
        v = getattr(self, key)
        if v is None:
            return None
        if key in ("totals", "summary"):
            return v.to_json()
        if key == "gates":
            return [g.to_json() for g in v]
        if isinstance(v, tuple):
            return list(v)
        return v

    def to_json(self) -> dict:
        """The report as report.json holds it, in its key order."""
        out = {}
        for key in KEYS:
            v = self._value(key)
            if v is not None:
                out[key] = v
        out.update((k, v) for k, v in self.other.items() if k not in out)
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> "Report":
        """A stored report (checked by ``read_report`` first where its file may be anything).
        Sections it lacks are None; keys this release does not know go to ``other``."""
        if isinstance(d, Report):
            return d
        kw: dict[str, Any] = {k: d.get(k) for k in KEYS if k not in ("extra",)}
        kw["totals"] = None if d.get("totals") is None else Totals.from_json(d["totals"])
        kw["summary"] = None if d.get("summary") is None else Summary(d["summary"])
        kw["gates"] = None if d.get("gates") is None else tuple(
            StoredGate.from_json(g) for g in d["gates"])
        for key in ("taxonomy", "instances", "selected", "incomplete", "notes", "shards"):
            kw[key] = _tuple(kw[key])
        kw["extra"] = dict(d.get("extra") or {})
        kw["other"] = {k: v for k, v in d.items() if k not in KEYS}
        return cls(**kw)

    def replace(self, **changes) -> "Report":
        return replace(self, **changes)

    # --- the read-only mapping the report was (callers that index it) ----------------------

    def __getitem__(self, key: str):
        v = self._value(key) if key in KEYS else self.other[key]
        if v is None and key in KEYS:
            raise KeyError(key)
        return v

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())

    __hash__ = None  # type: ignore[assignment] - carries dicts

    # --- reads the views share -----------------------------------------------------------

    @property
    def released(self) -> Mapping | None:
        """``settings.released``: only runs on the released data have it."""
        return (self.settings or {}).get("released")

    @property
    def served(self) -> Mapping | None:
        """``settings.served``: what a server model said it is when the run started (its
        ``model`` name and ``description``); only runs of such a model have it."""
        served = (self.settings or {}).get("served")
        return served if isinstance(served, Mapping) else None

    @property
    def model_label(self) -> str | None:
        """The model as every view names it: ``--duplexact-model``'s value, with the name
        its server gave when that differs (``bridge (my-model)``), so two checkpoints behind
        one bridge do not look the same."""
        name = str((self.served or {}).get("model") or "")
        if self.model and name and name != self.model:
            return f"{self.model} ({name})"
        return self.model

    @property
    def dataset_fingerprint(self) -> str | None:
        """``settings.dataset_fingerprint``: what the run's data was (content, not path)."""
        return (self.settings or {}).get("dataset_fingerprint")

    def note_lines(self) -> tuple[str, ...]:
        return self.notes or ()

    def gate_list(self) -> tuple[StoredGate, ...]:
        return self.gates or ()

