"""The one function that makes a run's final report (``build``): the plugin
(``pytest_plugin/session.py`` ``finish``) and ``duplexact merge`` both call it, so a merged
report has every section the unsharded run's has, built the same way. Its own module, beside
the leaf ``model.py``, because it reads every section's maker (the paper side by side, the
baseline gate, the cost) while those read the model."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from . import build_report, lookup
from .model import Measured, Report, StoredGate
from .sections.timing import FOUND


def base(outcomes, settings, model: str, selected: Iterable[str] | None = None) -> Report:
    """The sections every report has: what ran, its summary and instances (``build_report``).
    ``selected``: the ids of every instance the run's selection holds (default: those with an
    outcome), so a merge can tell which of them no report has."""
    return Report.from_json(build_report(outcomes, settings, model, selected))


def build(outcomes, settings, model: str, *, selected: Iterable[str] | None = None,
          usage: Mapping | None = None, prices: Mapping | None = None, judges: bool = True,
          gates: Sequence = (), notes: Sequence[str] = (),
          incomplete: Iterable[str] | None = None, estimate: Mapping | None = None,
          measured: Measured | None = None, budget: Mapping | None = None,
          baseline: str | None = None, baseline_alpha: float | None = None,
          baseline_ignore_borderline: bool = False,
          shards: Sequence[Mapping] | None = None, timing_tolerance_ms=FOUND) -> Report:
    """The whole final report of a run (or of a merge of its shards).

    ``usage``: the run's total (``data/usage.total``), None when nothing recorded any (then
    no usage, judges or cost either); ``prices``: the price table (``cost.load_prices``), None
    when it could not be read (no cost); ``judges``: whether to write the judges section when
    the usage names judges; ``gates``: the parsed gates (report/sections/gates.py), evaluated here;
    ``notes``: what makes the report incomplete; ``estimate`` with ``measured``: the plan
    before the run and what this invocation measured; ``budget``: the budget's state;
    ``baseline``: the path of a stored report to gate against (report/sections/baseline.py),
    ``baseline_ignore_borderline``: its flips of borderline verdicts set aside;
    ``timing_tolerance_ms``: the run's timing tolerance (ms, None: off), as the ``clock``
    section states it (``timing.FOUND``: the largest the outcomes' clocks say)."""
    from .sections import gates as gates_mod

    report = base(outcomes, settings, model, selected)
    results = [gates_mod.evaluate(g, lookup(report)) for g in gates]
    sections: dict[str, Any] = {
        "gates": tuple(StoredGate.from_json(r.to_dict()) for r in results),
        "incomplete": tuple(sorted(incomplete)) if incomplete is not None else None,
        "notes": tuple(notes)}
    if usage is not None:
        from .sections.judging import section as judges_section

        sections["usage"] = usage
        if judges and (judged := judges_section(usage)) is not None:
            sections["judges"] = judged  # which judges, and whether S is the paper's kind
        if prices is not None:
            from ..spend.cost import estimate as cost_estimate

            sections["cost"] = cost_estimate(usage, prices)
    from .sections.timing import section as timing_section

    # wall-clock trials only
    sections["clock"] = timing_section(outcomes, timing_tolerance_ms)
    report = report.replace(**sections)
    if report.released is not None:  # only runs on the released data
        from .sections.paper_comparison import paper_section

        report = report.replace(paper_comparison=paper_section(report))
    if estimate is not None:
        report = report.replace(estimate=estimate)
        if measured is not None:  # beside the estimate: how far to trust it
            report = report.replace(measured={
                "wall_s": measured.wall_s, "cost": (report.cost or {}).get("total"),
                "instances": measured.instances})
    if budget is not None:
        report = report.replace(budget=budget)
    if baseline:  # regression gate (report/sections/baseline.py): significant drops fail the run
        from .sections.baseline import DEFAULT_ALPHA, gate

        alpha = DEFAULT_ALPHA if baseline_alpha is None else baseline_alpha
        report = report.replace(baseline=gate(report, baseline, alpha,
                                              baseline_ignore_borderline))
    if shards is not None:
        report = report.replace(shards=tuple(shards))
    return report


def passed(report: Report) -> bool:
    """No gate failed, the baseline (if any) found no significant drop, and no instance
    ended in an error: what a gated run's exit status says."""
    return (all(g.passed for g in report.gate_list())
            and (report.baseline is None or report.baseline["passed"])
            and report.totals.errors == 0)
