"""The session's state, by role. Under pytest-xdist the controller and each worker hold their
own ``DuplexactSession`` (session.py); a serial run's one process plays both roles, so it
fills both objects. What the run is (its config, instances, settings, run directory, what a
resume reuses) stays on the session itself, which both roles read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .termination import TerminationGuard


@dataclass
class ControllerState:
    """The controller's: it collects every test's outcome (xdist replays the workers'
    reports to it), keeps the budget, and writes the report and the terminal's lines."""

    notes: list[str] = field(default_factory=list)  # into the report
    notices: list[str] = field(default_factory=list)  # terminal only, once before the run
    messages: list[str] = field(default_factory=list)  # terminal only, not in the report
    baseline: str | None = None  # report gated against (--duplexact-baseline/-compare)
    lock: Any = None  # runlock.RunLock of the run directory
    outcomes: dict[str, dict] = field(default_factory=dict)  # nodeid -> outcome dict
    usage: dict[str, dict] = field(default_factory=dict)  # nodeid -> its remote-service cost
    expected: set[str] | None = None  # instance ids pytest collected to run
    estimate: dict | None = None  # spend/estimate.py
    budget: Any = None  # report/budget.Budget, with --duplexact-max-cost/-wall
    started: float = 0.0  # time.monotonic() once the run is configured
    billed: dict = field(default_factory=dict)  # usage.total of this invocation's own trials
    billed_ids: set[str] = field(default_factory=set)  # ... the tests counted in it
    admitted: dict[str, dict] = field(default_factory=dict)  # nodeid -> its trial's prefetch.measure()
    termination: TerminationGuard = field(default_factory=TerminationGuard)  # SIGTERM: Ctrl-C
    progress: Any = None  # live_progress.Progress, the live line (when shown)
    report: Any = None  # report.model.Report, once finish() has built it
    gate_results: list = field(default_factory=list)


@dataclass
class WorkerState:
    """The worker's, the process that runs the instances (an xdist worker, or the serial
    run's one process): the model, the harness around it, and what it looks ahead to."""

    model: Any = None  # built before the run folder is opened (serial runs: _build_model)
    build_exc: Exception | None = None  # _build_model's failure, for a folder the user named
    build_error: str | None = None  # the harness's failed build, said once
    build_cause: BaseException | None = None  # what the factory raised (error.txt has it)
    harness: Any = None  # run.harness.Harness, built on first use
    next_item: Any = None  # the item pytest runs after the current one (look-ahead)
    unreached: int = 0  # instances in a row whose server could not be reached
