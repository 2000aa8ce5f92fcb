import asyncio
import threading
from types import SimpleNamespace

import pytest

from pytest_duplexact.run.prefetch import Prefetcher


def inst(k):
    return SimpleNamespace(id=f"i{k}")


def test_bounded_concurrency_and_results_by_instance():
    lock, live, peak = threading.Lock(), [0], [0]

    async def run(instance):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        await asyncio.sleep(0.05)
        with lock:
            live[0] -= 1
        return f"rec-{instance.id}"

    p = Prefetcher(run, concurrency=3)
    try:
        items = [inst(k) for k in range(9)]
        p.submit(items)
        assert [p.result(i) for i in items] == [f"rec-i{k}" for k in range(9)]
        assert peak[0] == 3
    finally:
        p.close()


def test_failure_is_that_instance_only():
    async def run(instance):
        if instance.id == "i1":
            raise RuntimeError("session dropped")
        return instance.id

    p = Prefetcher(run, concurrency=2)
    try:
        a, b, c = inst(0), inst(1), inst(2)
        p.submit([a, b, c])
        assert p.result(a) == "i0"
        with pytest.raises(RuntimeError, match="session dropped"):
            p.result(b)
        assert p.result(c) == "i2"
        assert p.result(inst(5)) == "i5"  # not prefetched: started on demand
    finally:
        p.close()


def _run_all(monkeypatch, lateness: float, n: int, concurrency: int):
    """``n`` trials of 0.2 s through a Prefetcher whose loop reports ``lateness`` (s) to its
    controller: (the cap each trial was admitted under, in order; the peak in flight after
    the first wave; what measure() said of each)."""
    from pytest_duplexact.pipelines.clock import LoopMonitor

    monkeypatch.setattr(LoopMonitor, "recent_lateness", lambda self: lateness)
    lock, live, peaks = threading.Lock(), [0], []

    async def run(instance):
        with lock:
            live[0] += 1
            peaks.append(live[0])
        await asyncio.sleep(0.2)
        with lock:
            live[0] -= 1
        return instance.id

    p = Prefetcher(run, concurrency=concurrency, tolerance=0.1)
    try:
        items = [inst(k) for k in range(n)]
        p.submit(items)
        caps = [p.admitted_under[i.id] for i in items if p.result(i) is not None]
        return caps, max(peaks[concurrency:]), [p.measure(i.id) for i in items]
    finally:
        p.close()


def test_a_late_loop_lowers_the_cap_before_more_trials_are_admitted(monkeypatch):
    from pytest_duplexact.run.admission import DECREASE

    # lateness over the back-off line from the first look: the controller cuts the cap
    # before the first trial ends (its first look is a ready callback, the trials' ends
    # are timers), so every later trial is admitted under the cut cap or lower
    caps, peak, measures = _run_all(monkeypatch, 0.08, 16, 8)
    assert max(caps[8:]) <= int(8 * DECREASE) and peak <= int(8 * DECREASE)
    # in flight at least its 0.2 s (a busier machine only adds)
    assert all(m["requested"] == 8 and m["stream_s"] >= 0.2 for m in measures)
    assert [m["cap"] for m in measures] == caps


def test_with_headroom_the_cap_stays_at_what_was_asked(monkeypatch):
    from pytest_duplexact.run.admission import concurrency_measured

    caps, _, measures = _run_all(monkeypatch, 0.0, 12, 4)
    assert caps == [4] * 12
    got = concurrency_measured(measures)
    assert got["concurrency"] == {"requested": 4, "sustained_p50": 4, "sustained_min": 4}
    assert got["loop_cpu_ms_per_stream_s"] >= 0.0


def test_a_rerun_lowers_the_cap_halved_per_attempt_and_runs_under_it():
    p = Prefetcher(lambda i: None, concurrency=16, tolerance=0.1)

    async def rerun(instance):  # as the harness's guard does before a late trial's re-run
        await p.quieter(2)
        return instance.id

    p._run = rerun
    try:
        assert p.result(inst(0)) == "i0"
        assert p.limit == 4
        assert p.measure("i0")["cap"] == 4  # its counted attempt ran under the lowered cap
    finally:
        p.close()
    fixed = Prefetcher(lambda i: None, concurrency=16)  # no tolerance: no controller
    try:
        assert fixed.limit == 16 and fixed.aimd is None
    finally:
        fixed.close()
