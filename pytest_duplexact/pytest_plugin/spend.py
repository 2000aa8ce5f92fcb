"""The run's estimate and budget, from its RunConfig (spend/estimate.py, spend/budget.py hold the
logic; this module only reads the run's configuration, the store and the pytest-xdist
layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .config import RunConfig


def model_kind(spec: str, options: dict | None = None) -> tuple[str, bool, str]:
    """("stepped" | "streaming" | "replay" | "unknown", billed, what the kind rests on) for a
    model, without calling it: a built-in's row says; a bridge's server says in its READY
    (one connection, as the run's preflight makes); an import path's factory says when it is
    a class (else "unknown", not billed unless the price table knows its name)."""
    from ..models import RECORDED_PREFIX
    from ..models.catalogue.builtins import BUILTINS

    if spec.startswith(RECORDED_PREFIX):
        return "replay", False, ""
    req = BUILTINS.get(spec)
    if req is None:
        kind, basis = _factory_kind(spec)
        return kind, False, basis
    kind = req.kind.split(",")[0].strip()  # "stepped, bridge": a stepped model
    if kind in ("stepped", "streaming"):
        return kind, req.billed, ""
    kind, basis = _served_kind(spec, options or {})  # "stepped or streaming, as the server says"
    return kind, req.billed, basis


def _served_kind(spec: str, options: dict) -> tuple[str, str]:
    """What the server's READY says it is (models.probe), or "unknown" and why."""
    from ..models import probe

    try:
        probed = probe(spec, **options)
    except Exception as e:  # the client's own, user-facing message; the preflight says it
        return "unknown", ("kind unknown: its server did not answer ("
                           + " ".join(str(e).split())[:120] + ")")
    mode = getattr(probed, "mode", None)
    if mode not in ("stepped", "streaming"):
        return "unknown", "kind unknown: its server did not say whether it streams"
    return mode, f"{mode}, as its server's READY says"


def _factory_kind(spec: str) -> tuple[str, str]:
    """An import path's kind, when its factory is a model class (importing it calls no
    model); a function's model is only known once built."""
    import inspect

    from ..models import factory_for
    from ..models.adapter import traits

    unknown = "unknown", "kind unknown: an import path's is known once it is built"
    try:
        factory = factory_for(spec)
    except Exception:  # the run itself says what is wrong with it
        return unknown
    if not inspect.isclass(factory):
        return unknown
    declared = traits(factory)
    if declared.async_connect:
        return "streaming", f"streaming, as {factory.__name__} has an async connect"
    if declared.steps:
        return "stepped", f"stepped, as {factory.__name__} has step"
    return unknown


def workers(config) -> int:
    """pytest-xdist worker processes (1 without -n)."""
    n = getattr(config.option, "numprocesses", None)
    try:
        return max(1, int(n)) if n else 1
    except (TypeError, ValueError):
        return 1


def previous_report(store: Path, settings) -> dict | None:
    """The newest stored report of the same model with the same options (report/store/saved.py),
    or None; unreadable entries are passed over. As the estimate takes it: the stored JSON
    with its ``_name`` (spend/estimate.py ``plan``)."""
    from ..report.model import Report
    from ..report.store.saved import entries

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
    from ..spend.cost import PriceError, load_prices
    from ..spend.estimate import describe

    try:
        prices = load_prices(run.prices)
    except PriceError as e:
        raise pytest.UsageError(f"--duplexact-prices: {e}") from None
    estimate = estimate_for(run, settings, instances, prices, workers(config))
    lines = describe(estimate)
    if resumed:
        lines[0] += f" ({resumed} already finished: not run again)"
    budget = budget_for(run, estimate, prices)  # a budget the run would refuse, refused here
    if run.estimate:
        # a dry run passes only what the run would take: the options checked without the
        # model or the network (its budget above, the baseline, the report path). A key, the
        # model's own checks and a server are not asked for: an estimate needs none of them
        from .preflight import check_baseline, check_report_path

        check_report_path(run)
        check_baseline(run)
        print("\n".join(lines), flush=True)
        pytest.exit("duplexact: estimate only: no model was called, nothing was written",
                    returncode=0)
    return estimate, lines, budget


def estimate_for(run: RunConfig, settings, instances, prices: dict, n_workers: int) -> dict:
    from ..models.catalogue.builtins import BUILTINS
    from ..spend.estimate import plan

    kind, billed, basis = model_kind(settings.model, dict(settings.options))
    if not billed and settings.model not in BUILTINS:  # an import path with a price bills
        from ..spend.estimate import price_entry, priced_name

        billed = price_entry(prices, priced_name(settings)) is not None
    return plan(instances, settings, prices=prices, kind=kind, kind_basis=basis,
                billed_model=billed,
                concurrency=max(1, run.concurrency or 1),
                workers=n_workers, previous=previous_report(run.store, settings),
                branches=settings.bargein_branches != "off")


def budget_for(run: RunConfig, estimate: dict, prices: dict):
    """The run's Budget, or None without --duplexact-max-cost / --duplexact-max-wall; refused
    (UsageError) where a service the run uses has no price."""
    from ..spend.budget import Budget, BudgetError, parse_duration

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
                                  "--duplexact-prices=FILE (spend/prices.toml shows the "
                                  "layout)")
        n = estimate["instances"] or 1
        return Budget(max_cost, max_wall, prices,
                      trial_estimate=estimate["cost"]["total"][1] / n,
                      currency=estimate["cost"]["currency"])
    except BudgetError as e:
        raise pytest.UsageError(f"--duplexact-max-cost: {e}") from None
