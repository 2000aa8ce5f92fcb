"""The run's estimate and budget, from its RunConfig (report/estimate.py, report/budget.py hold the
logic; this module only reads the run's configuration, the store and the pytest-xdist
layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .config import RunConfig


def model_kind(spec: str) -> tuple[str, bool]:
    """("stepped" | "streaming" | "replay" | "unknown", billed) for a model name, without
    building it (an import path is only known once built: "unknown", not billed unless the
    price table knows its name)."""
    from ..models import RECORDED_PREFIX
    from ..models.builtins import BUILTINS

    if spec.startswith(RECORDED_PREFIX):
        return "replay", False
    req = BUILTINS.get(spec)
    return (req.kind, req.billed) if req is not None else ("unknown", False)


def workers(config) -> int:
    """pytest-xdist worker processes (1 without -n)."""
    n = getattr(config.option, "numprocesses", None)
    try:
        return max(1, int(n)) if n else 1
    except (TypeError, ValueError):
        return 1


def previous_report(store: Path, settings) -> dict | None:
    """The newest stored report of the same model with the same options (report/store.py),
    or None; unreadable entries are passed over. As the estimate takes it: the stored JSON
    with its ``_name`` (report/estimate.py ``plan``)."""
    from ..report.model import Report
    from ..report.store import entries

    for _, path in reversed(entries(store)):
        try:
            rep = json.loads(path.read_text(encoding="utf-8"))
            report = Report.from_json(rep)  # read typed; a file no release wrote is passed over
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        stored = report.settings
        if not isinstance(stored, dict) or report.model != settings.model:
            continue
        if [list(p) for p in settings.model_options] != stored.get("model_options", []):
            continue
        return {**rep, "_name": f"stored run {path.name}"}
    return None


def plan_run(config, run: RunConfig, settings, instances, resumed: int):
    """(estimate, the lines to show before the run, budget or None): the estimate always (the
    header line, report.json), the budget with --duplexact-max-cost / -wall; with
    --duplexact-estimate, print the estimate and end before anything is created."""
    from ..report.cost import PriceError, load_prices
    from ..report.estimate import describe

    try:
        prices = load_prices(run.prices)
    except PriceError as e:
        raise pytest.UsageError(f"--duplexact-prices: {e}") from None
    estimate = estimate_for(run, settings, instances, prices, workers(config))
    lines = describe(estimate)
    if resumed:
        lines[0] += f" ({resumed} already finished: not run again)"
    if run.estimate:
        print("\n".join(lines), flush=True)
        pytest.exit("duplexact: estimate only: no model was called, nothing was written",
                    returncode=0)
    return estimate, lines, budget_for(run, estimate, prices)


def estimate_for(run: RunConfig, settings, instances, prices: dict, n_workers: int) -> dict:
    from ..report.estimate import plan

    kind, billed = model_kind(settings.model)
    if not billed and kind == "unknown":  # an import path with a price entry bills
        from ..report.estimate import price_entry, priced_name

        billed = price_entry(prices, priced_name(settings)) is not None
    return plan(instances, settings, prices=prices, kind=kind, billed_model=billed,
                concurrency=max(1, run.concurrency or 1),
                workers=n_workers, previous=previous_report(run.store, settings),
                branches=settings.bargein_branches != "off")


def budget_for(run: RunConfig, estimate: dict, prices: dict):
    """The run's Budget, or None without --duplexact-max-cost / --duplexact-max-wall; refused
    (UsageError) where a service the run uses has no price."""
    from ..report.budget import Budget, BudgetError, parse_duration

    run.need("max-cost")
    max_cost, wall = run.max_cost, run.max_wall
    if max_cost is None and not wall:
        return None
    try:
        max_wall = parse_duration(wall) if wall else None
    except BudgetError as e:
        raise pytest.UsageError(f"--duplexact-max-wall: {e}") from None
    try:
        if max_cost is not None:
            unpriced = [(label, s["model"]) for label, s in estimate["cost"]["services"].items()
                        if s["cost"] is None and s["note"].startswith("no price")]
            if unpriced:
                label, model = unpriced[0]
                raise BudgetError(f"no price for {model!r} ({label.replace('_', ' ')}), so "
                                  "its spend cannot be counted; add it with "
                                  "--duplexact-prices=FILE (report/prices.toml shows the "
                                  "layout)")
        n = estimate["instances"] or 1
        return Budget(max_cost, max_wall, prices,
                      trial_estimate=estimate["cost"]["total"][1] / n,
                      currency=estimate["cost"]["currency"])
    except BudgetError as e:
        raise pytest.UsageError(f"--duplexact-max-cost: {e}") from None
