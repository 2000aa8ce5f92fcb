"""A running run's progress, as numbers and one line of text: what ``--duplexact-progress``
shows while the instances run (pytest_plugin/live_progress.py draws it; nothing here touches the
terminal or reads a clock, so the estimator is tested on simulated schedules).

Time left comes from the measured pace, in work, not in instances: each instance weighs the
seconds of audio its pipeline streams (``estimate.stream_bounds``, the middle of its range),
so a run whose long instances come last is not promised an early end. The pace is measured
from the first instance reported on, so what the start cost once (the model, the transcriber
and the scoring worker loading; minutes on a busy machine) is not spread over the run, and
a run at concurrency N, whose first report comes when N trials are already well along, is
not taken for N times slower than it is. Until a second instance is reported there is no
pace ("measuring").
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Pace:
    """Time left from the work done so far; ``work``: instance id -> its weight (seconds of
    audio) for the instances this invocation runs."""

    work: dict[str, float]
    done: set[str] = field(default_factory=set)
    done_work: float = 0.0
    first: tuple[float, float] | None = None  # (clock, work done) at the first report

    def finish(self, instance_id: str, now: float) -> None:
        if instance_id in self.work and instance_id not in self.done:
            self.done.add(instance_id)
            self.done_work += self.work[instance_id]
            if self.first is None:
                self.first = (now, self.done_work)

    @property
    def total(self) -> float:
        return sum(self.work.values())

    def left(self, now: float) -> float | None:
        """Seconds until the last instance finishes, or None before a pace was measured."""
        work_left = self.total - self.done_work
        if len(self.done) >= len(self.work) or work_left <= 0:
            return 0.0 if self.done else None
        if self.first is None or len(self.done) < 2 or now <= self.first[0]:
            return None
        t, w = self.first
        return work_left * (now - t) / (self.done_work - w)


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
