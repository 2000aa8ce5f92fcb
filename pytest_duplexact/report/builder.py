"""The one function that makes a run's final report (``build``): the plugin
(``pytest_plugin/session.py`` ``finish``) and ``duplexact merge`` both call it, so a merged
report has every section the unsharded run's has, built the same way. It builds the typed
``Report`` directly from a few small inputs: what ran (``Ran``), what it used and cost
(``Spent``) and, where the run asks for one, the gate against a stored report
(``BaselineGate``). Its own module, beside the leaf ``model.py``, because it reads every
section's maker (the paper side by side, the baseline gate, the cost) while those read the
model."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .. import __version__
from ..data import taxonomy
from ..data.results import InstanceOutcome
from ..run.settings import RunSettings
from . import lookup
from .aggregate import aggregate
from .model import Measured, Report, StoredGate, Summary, Totals
from .sections.timing import FOUND


@dataclass(frozen=True)
class Ran:
    """What ran: its outcomes, settings and model (as ``--duplexact-model`` names it), and
    ``selected``, the ids of every instance the run's selection holds (None: those with an
    outcome), so a merge can tell which of them no report has."""

    outcomes: Sequence[InstanceOutcome]
    settings: RunSettings
    model: str
    selected: Iterable[str] | None = None


@dataclass(frozen=True)
class Spent:
    """What the run used and what it was expected to. ``usage``: the run's total
    (``data/usage.total``), None when nothing recorded any (then no usage, judges or cost
    either); ``prices``: the price table (``spend.cost.load_prices``), None when it could not
    be read (no cost); ``judges``: whether to write the judges section when the usage names
    judges; ``estimate`` with ``measured``: the plan before the run and what this invocation
    measured; ``budget``: the budget's state."""

    usage: Mapping | None = None
    prices: Mapping | None = None
    judges: bool = True
    estimate: Mapping | None = None
    measured: Measured | None = None
    budget: Mapping | None = None


@dataclass(frozen=True)
class BaselineGate:
    """The stored report to gate against (report/sections/baseline.py): its path, the
    significance level (None: ``DEFAULT_ALPHA``) and whether flips of borderline verdicts are
    set aside."""

    path: str
    alpha: float | None = None
    ignore_borderline: bool = False


def base(ran: Ran) -> Report:
    """The sections every report has: what ran, its summary and its instances."""
    outcomes = sorted(ran.outcomes, key=lambda o: o.id)
    selected = set(ran.selected) if ran.selected is not None else {o.id for o in outcomes}
    return Report(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        generator=f"pytest-duplexact {__version__}",
        model=ran.model,
        settings=ran.settings.to_dict(),
        taxonomy=tuple({"action": c.action, "condition": c.id, "label": c.label,
                        "pipeline": c.pipeline.value} for c in taxonomy.CONDITIONS),
        totals=Totals(len(outcomes), sum(o.error is not None for o in outcomes)),
        summary=Summary(aggregate(outcomes).to_dict()),
        instances=tuple(o.to_dict() for o in outcomes),
        selected=tuple(sorted(selected)),
        gates=())


def build(ran: Ran, spent: Spent = Spent(), *, gates: Sequence = (),
          baseline: BaselineGate | None = None, notes: Sequence[str] = (),
          incomplete: Iterable[str] | None = None, shards: Sequence[Mapping] | None = None,
          timing_tolerance_ms=FOUND) -> Report:
    """The whole final report of a run (or of a merge of its shards).

    ``gates``: the parsed gates (report/sections/gates.py), evaluated here; ``baseline``: the
    stored report to gate against; ``notes``: what makes the report incomplete;
    ``incomplete``: the selected instances a merge lacks; ``shards``: where a merge's shards
    came from; ``timing_tolerance_ms``: the run's timing tolerance (ms, None: off), as the
    ``clock`` section states it (``FOUND``: the largest the outcomes' clocks say)."""
    from .sections import gates as gates_mod

    report = base(ran)
    results = [gates_mod.evaluate(g, lookup(report)) for g in gates]
    sections: dict[str, Any] = {
        "gates": tuple(StoredGate.from_json(r.to_dict()) for r in results),
        "incomplete": tuple(sorted(incomplete)) if incomplete is not None else None,
        "notes": tuple(notes)}
    if spent.usage is not None:
        from .sections.judging import section as judges_section

        sections["usage"] = spent.usage
        if spent.judges and (judged := judges_section(spent.usage)) is not None:
            sections["judges"] = judged  # which judges, and whether S is the paper's kind
        if spent.prices is not None:
            from ..spend.cost import estimate as cost_estimate

            sections["cost"] = cost_estimate(spent.usage, spent.prices)
    from .sections.timing import section as timing_section

    # wall-clock trials only
    sections["clock"] = timing_section(ran.outcomes, timing_tolerance_ms)
    report = report.replace(**sections)
    if report.released is not None:  # only runs on the released data
        from .sections.paper_comparison import paper_section

        report = report.replace(paper_comparison=paper_section(report))
    if spent.estimate is not None:
        report = report.replace(estimate=spent.estimate)
        if spent.measured is not None:  # beside the estimate: how far to trust it
            report = report.replace(measured={
                "wall_s": spent.measured.wall_s, "cost": (report.cost or {}).get("total"),
                "instances": spent.measured.instances,
                # only where trials streamed with --duplexact-concurrency above 1
                **({"concurrency": dict(spent.measured.concurrency),
                    "loop_cpu_ms_per_stream_s": spent.measured.loop_cpu_ms_per_stream_s}
                   if spent.measured.concurrency is not None else {})})
    if spent.budget is not None:
        report = report.replace(budget=spent.budget)
    if baseline is not None:  # regression gate: significant drops fail the run
        from .sections.baseline import DEFAULT_ALPHA, gate

        alpha = DEFAULT_ALPHA if baseline.alpha is None else baseline.alpha
        report = report.replace(baseline=gate(report, baseline.path, alpha,
                                              baseline.ignore_borderline))
    if shards is not None:
        report = report.replace(shards=tuple(shards))
    return report


def passed(report: Report) -> bool:
    """No gate failed, the baseline (if any) found no significant drop, and no instance
    ended in an error: what a gated run's exit status says."""
    return (all(g.passed for g in report.gate_list())
            and (report.baseline is None or report.baseline["passed"])
            and report.totals.errors == 0)


def gated_exit(report: Report, missing: int, of: int | None = None) -> tuple[int, str | None]:
    """A gated run's exit status, and what to say when the gates passed a run with
    ``missing`` selected instances unrun (``of`` selected): gates pass a complete run only,
    so that is 1, never 0 (the plugin's session and ``duplexact merge`` alike)."""
    ok = passed(report)
    if not missing:
        return (0 if ok else 1), None
    if not ok:
        return 1, None
    counted = f"{missing} of {of}" if of is not None else f"{missing}"
    return 1, (f"the gates passed on an incomplete run ({counted} selected instance(s) have "
               "no outcome): exit status 1, not 0")