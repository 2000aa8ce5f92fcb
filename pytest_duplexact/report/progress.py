"""A running run's progress, as numbers and one line of text: what ``--duplexact-progress``
shows while the instances run (pytest_plugin/progress.py draws it; nothing here touches the
terminal or reads a clock, so the estimator is tested on simulated schedules).

Time left comes from the measured pace, in work, not in instances: each instance weighs the
seconds of audio its pipeline streams (``estimate.stream_bounds``, the middle of its range),
so a run whose long instances come last is not promised an early end. Trials run ``lanes`` at
a time (concurrency x workers for a streaming model); those in flight when a test is reported
are, on average, half done, and are credited so: without that, a run at concurrency 4 would
look four times slower than it is until enough of it has finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the part of its work an instance in flight is credited with (uniform progress on average)
IN_FLIGHT_CREDIT = 0.5


@dataclass
class Pace:
    """Time left from the work done so far; ``work``: instance id -> its weight (seconds of
    audio) for the instances this invocation runs."""

    work: dict[str, float]
    lanes: int = 1
    started: float | None = None  # the clock when the first instance started
    done: set[str] = field(default_factory=set)
    done_work: float = 0.0

    def start(self, now: float) -> None:
        if self.started is None:
            self.started = now

    def finish(self, instance_id: str) -> None:
        if instance_id in self.work and instance_id not in self.done:
            self.done.add(instance_id)
            self.done_work += self.work[instance_id]

    @property
    def total(self) -> float:
        return sum(self.work.values())

    def left(self, now: float) -> float | None:
        """Seconds until the last instance finishes, or None before one has (no pace yet)."""
        if self.started is None or not self.done:
            return None
        n_left = len(self.work) - len(self.done)
        work_left = self.total - self.done_work
        if n_left <= 0 or work_left <= 0:
            return 0.0
        elapsed = max(now - self.started, 1e-9)
        # the one started as this test's instance freed its lane has barely begun
        credit = IN_FLIGHT_CREDIT * max(0, min(self.lanes, n_left) - 1) * work_left / n_left
        rate = (self.done_work + credit) / elapsed  # work per second
        return max(0.0, (work_left - credit) / rate)


@dataclass
class Tally:
    """What the finished tests said so far: per action, passed / failed (a measured miss);
    errors and skips apart (neither enters a rate)."""

    selected: int
    done: int = 0
    errors: int = 0
    skipped: int = 0
    passed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    def add(self, action: str, result: str) -> None:
        """``result``: "passed", "failed", "skipped" or "error" (pytest's own outcome)."""
        self.done += 1
        if result == "error":
            self.errors += 1
        elif result == "skipped":
            self.skipped += 1
        elif result in ("passed", "failed"):
            table = self.passed if result == "passed" else self.failed
            table[action] = table.get(action, 0) + 1
            other = self.failed if result == "passed" else self.passed
            other.setdefault(action, 0)

    def rates(self) -> list[tuple[str, int, int]]:
        """(action, passed, measured) in the order the actions first finished."""
        return [(a, n, n + self.failed.get(a, 0)) for a, n in self.passed.items()]


def clock(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h14m``."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass(frozen=True)
class Spend:
    """Money so far: spent, against the budget (``--duplexact-max-cost``) when there is one."""

    spent: float
    currency: str = "USD"
    budget: float | None = None

    def text(self) -> str:
        if self.budget is not None:
            return f"{self.spent:.2f} of {self.budget:.2f} {self.currency} budget"
        return f"{self.spent:.2f} {self.currency} spent"


def status(tally: Tally, elapsed: float, left: float | None, spend: Spend | None = None,
           width: int | None = None) -> str:
    """The one line: done / selected, errors, spend, elapsed and time left, then the pass
    rate so far by action (passed / measured: misses count, errors and skips do not); cut
    to ``width`` from its end."""
    head = f"duplexact {tally.done}/{tally.selected}"
    if tally.errors:
        head += f", {tally.errors} error{'s' if tally.errors != 1 else ''}"
    parts = [head] + ([spend.text()] if spend is not None else []) + [
        f"{clock(elapsed)}, " + ("time left: measuring" if left is None
                                 else f"~{clock(left)} left")]
    rates = [f"{a} {p}/{n}" for a, p, n in tally.rates() if n]
    if rates:
        parts.append("passed: " + ", ".join(rates))
    line = " | ".join(parts)
    if width is not None and len(line) > width:
        line = line[:max(0, width - 3)] + "..."
    return line


def weight(inst, branches: bool = True) -> float:
    """An instance's work: the middle of the seconds of audio its pipeline streams."""
    from .estimate import stream_bounds

    lo, hi = stream_bounds(inst, branches)
    return (lo + hi) / 2
