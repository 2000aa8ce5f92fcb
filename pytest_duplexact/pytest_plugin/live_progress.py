"""``--duplexact-progress``: what a running run says about itself (the numbers and the line:
spend/pace.py). On the controller only: under pytest-xdist it sees every worker's test
reports (the outcomes ride on them), so it counts for the whole run.

- ``bar``: one status line redrawn in place with pytest's own ``TerminalReporter.rewrite``
  after each instance, instead of the instances' dots and the files' names (a benchmark run's
  hundreds of dots say nothing the line does not); other tests keep theirs.
- ``lines``: a plain line every tenth of the run or every ``LINE_EVERY_S``, whichever comes
  first, and one at the end: a Slurm or CI log shows how far a run got.
- ``auto`` (the default): ``bar`` on a terminal (``lines`` with ``-v``, whose per-test lines
  a redrawn line would cut), ``lines`` when the output is not a terminal, ``off`` where the
  ``CI`` environment variable is set (CI logs stay as they were unless asked).
"""

from __future__ import annotations

import math
import os
import shutil
import time

import pytest

from ..spend.pace import Pace, Spend, Tally, status, weight

LINE_EVERY_S = 60.0  # lines mode: at least this often while instances finish
LINE_STEPS = 10  # ... and at every tenth of the run
MARKER = "duplexact"  # the suites' marker: a report of a benchmark instance


def in_ci(environ=os.environ) -> bool:
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def resolve(mode: str, tr, environ=os.environ) -> str:
    """The mode this run draws in: "bar", "lines" or "off"."""
    if tr is None or mode == "off":
        return "off"
    if mode == "auto":
        if in_ci(environ):
            return "off"
        if not tr.isatty():
            return "lines"
        mode = "bar"
    if mode == "bar" and tr.config.get_verbosity() > 0:
        return "lines"
    return mode


def _outcome(report) -> str:
    """pytest's outcome of one phase, as the tally counts it."""
    if report.when == "call":
        return report.outcome  # passed | failed | skipped
    if report.failed:
        return "error"
    return "skipped" if report.skipped else "passed"


class Progress:
    """Registered on the controller as a plugin; reads what the session collected (its
    outcomes, billed usage, budget)."""

    def __init__(self, session, mode: str, tr):
        from ..spend.cost import load_prices

        self.session, self.mode, self.tr = session, mode, tr
        self.by_test = session.by_test()  # test name -> its instance
        self.results: dict[str, str] = {}  # nodeid -> worst outcome of its phases so far
        self.tally: Tally | None = None
        self.pace: Pace | None = None
        self.prices = load_prices(session.run_config.prices)  # checked by the estimate
        est = session.controller.estimate or {}
        self.bills = bool((est.get("cost") or {}).get("total", [0, 0])[1])
        self.started: float | None = None
        self._last_line = None  # (time, done) of the last plain line
        self._drawn = False

    # --- numbers ----------------------------------------------------------------------------

    def _begin(self) -> None:
        """The selection as pytest runs it (known once collected, on xdist's controller once
        its workers said what they run); resumed outcomes take no time."""
        s = self.session
        ids = s.controller.expected if s.controller.expected else {i.id for i in s.instances}
        self.tally = Tally(len(ids))
        branches = s.settings.bargein_branches != "off"
        self.pace = Pace({i.id: weight(i, branches) for i in s.instances
                          if i.id in ids and i.id not in s.resumed})

    def _spend(self) -> Spend | None:
        from ..spend.cost import estimate

        budget = self.session.controller.budget
        if budget is not None and budget.max_cost is not None:
            return Spend(budget.spent, budget.currency, budget.max_cost)
        if not self.bills:
            return None
        priced = estimate(self.session.controller.billed, self.prices)
        return Spend(priced["total"], self.prices.get("currency", "USD"))

    def line(self, now: float, width: int | None = None) -> str:
        elapsed = now - self.started if self.started is not None else 0.0
        return status(self.tally, elapsed, self.pace.left(now), self._spend(), width)

    # --- hooks ------------------------------------------------------------------------------

    def _instance(self, nodeid: str):
        return self.by_test.get(nodeid.rpartition("::")[2])

    @pytest.hookimpl(tryfirst=True)  # before the terminal writes the file's name
    def pytest_runtest_logstart(self, nodeid, location) -> None:
        ours = self._instance(nodeid) is not None
        if self.mode == "bar":  # an instance's file name would start a line of its own
            self.tr.showfspath = False if ours else None
            if self._drawn and not ours:  # another test's dots go below the line
                self.tr.write("\n")
                self._drawn = False
        if self.started is None and ours:
            self.started = time.monotonic()
            if self.pace is None:
                self._begin()

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report, config):
        """bar: a benchmark instance shows in the line, not as a letter (counted as usual)."""
        res = yield
        if self.mode == "bar" and MARKER in getattr(report, "keywords", {}) and res:
            category, _letter, _word = res
            return category, "", ""
        return res

    @pytest.hookimpl(trylast=True)  # after the session took the outcome off the report
    def pytest_runtest_logreport(self, report) -> None:
        inst = self._instance(report.nodeid)
        if inst is None:
            return
        seen = self.results.get(report.nodeid)
        now = _outcome(report)
        if seen in (None, "passed") or (seen == "skipped" and now != "passed"):
            self.results[report.nodeid] = now
        if report.when != "teardown":
            return
        if self.pace is None:
            self._begin()
        self.tally.add(inst.action, self.results.pop(report.nodeid))
        if inst.id not in self.session.resumed:
            self.pace.finish(inst.id, time.monotonic())
        self._show(final=False)

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside the terminal's: before its [100%]
    def pytest_runtestloop(self, session):
        try:
            return (yield)
        finally:
            if self.tally is not None and self.tally.done:
                self._show(final=True)

    # --- drawing ----------------------------------------------------------------------------

    def _show(self, final: bool) -> None:
        now = time.monotonic()
        if self.mode == "bar":
            width = shutil.get_terminal_size().columns - 1
            self.tr.rewrite(self.line(now, width), erase=True, bold=True)
            self._drawn = True
            if final:  # the last state stays; pytest's own lines start below it
                self.tr.write("\n")
            self.tr.flush()
            return
        step = max(1, math.ceil(self.tally.selected / LINE_STEPS))
        last_t, last_done = self._last_line or (self.started or now, 0)
        due = self.tally.done // step > last_done // step or now - last_t >= LINE_EVERY_S
        if final or (due and self.tally.done < self.tally.selected):
            self._last_line = (now, self.tally.done)
            if self.tr.currentfspath is None:  # xdist's letters carry no file name: the
                self.tr.currentfspath = -2  # line is pytest's "in progress" (write_ensure_prefix)
            self.tr.write_line(self.line(now))
