"""A run's schedule, simulated: instances started in order on ``lanes`` slots (the prefetcher's
concurrency), each taking its audio seconds times a slowdown plus a fixed overhead (scoring),
reported in order (pytest reports test k once instance k is done, whatever finished before
it). What ``report.progress.Pace`` says at each report, against the truth. Shared by
tests/spend/test_pace.py and benchmarks/progress_eta.py."""

from __future__ import annotations

import heapq
import random

from pytest_duplexact.spend.pace import Pace


def schedule(work: list[float], lanes: int, *, slowdown: float = 1.0, overhead: float = 0.5,
             jitter: float = 0.0, seed: int = 0, startup: float = 0.0) -> list[float]:
    """The time each instance is reported, in order; ``startup``: a one-off cost before the
    first trials start (the model, the transcriber and the scoring worker loading)."""
    rng = random.Random(seed)
    free = [startup] * lanes
    reported, last = [], 0.0
    for w in work:
        start = heapq.heappop(free)
        took = w * slowdown * (1 + rng.uniform(-jitter, jitter)) + overhead
        heapq.heappush(free, start + took)
        last = max(last, start + took)  # in order: waits for the ones before it
        reported.append(last)
    return reported


def eta_errors(work: list[float], lanes: int, **kw) -> list[tuple[float, float, float]]:
    """(fraction of the run's wall time elapsed, time left said (None: no pace yet), time
    left in truth) at each report but the last."""
    times = schedule(work, lanes, **kw)
    end = times[-1]
    pace = Pace({str(i): w for i, w in enumerate(work)})
    out = []
    for i, t in enumerate(times[:-1]):
        pace.finish(str(i), t)
        out.append((t / end, pace.left(t), end - t))
    return out


def at_halfway(work: list[float], lanes: int, **kw) -> float:
    """The relative error of the time left at the first report past half the wall time that
    has a pace (a second report)."""
    for frac, said, truth in eta_errors(work, lanes, **kw):
        if frac >= 0.5 and said is not None:
            return abs(said - truth) / truth
    raise AssertionError("no report past the halfway point")
