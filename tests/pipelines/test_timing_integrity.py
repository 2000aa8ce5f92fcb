"""The harness measures its own lateness on a wall-clock trial (issue 33), and a trial over
the tolerance is never scored. Stalls are injected (a blocking call on the event loop), so
every bound here is a lower bound a busier machine only raises: nothing depends on load."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.data.recording import Recording
from pytest_duplexact.models.streaming_contract import AudioDelta
from pytest_duplexact.pipelines import clock
from pytest_duplexact.pipelines.clock import (
    TICK_S,
    Lateness,
    LoopMonitor,
    TimingUnreliable,
    TrialLate,
    describe,
)
from pytest_duplexact.run.harness import TIMING_RERUNS, Harness
from tests.pipelines.test_streaming_duplex import MemorySession, duplex

BLOCK_S = 0.3  # the injected stall


class BlockingSession(MemorySession):
    """Blocks the event loop (time.sleep) inside its ``block_at``-th send: a stalled harness."""

    def __init__(self, block_at: int):
        super().__init__()
        self.block_at = block_at

    async def send(self, pcm):
        await super().send(pcm)
        if len(self.sends) == self.block_at:
            time.sleep(BLOCK_S)


@pytest.mark.asyncio
async def test_a_stalled_loop_shows_as_input_lag_and_loop_stall():
    d = duplex(BlockingSession(block_at=3))
    await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
    rec = await d.close()
    c = rec.clock
    # the 4th chunk was due 20 ms after the 3rd went out, the loop was blocked 300 ms
    assert c["input_lag_max_ms"] >= (BLOCK_S - 0.02 - 0.005) * 1000, c
    # a tick due at most TICK_S into the block ran after it
    assert c["loop_stall_max_ms"] >= (BLOCK_S - TICK_S - 0.005) * 1000, c
    assert any(what.startswith("input_lag max") for _, what in rec.events)


class EventThenStall(BlockingSession):
    """An event arrives, then the loop is blocked before it can be stamped: in the
    ``block_at``-th send, so it lands mid-push however late the machine runs (a timer at
    50 ms once fired after push had caught up and close dropped the unread event)."""

    async def send(self, pcm):
        if len(self.sends) + 1 == self.block_at:
            self.queue.put_nowait(AudioDelta("a", np.zeros(240, np.float32)))
        await super().send(pcm)


@pytest.mark.asyncio
async def test_an_event_that_waited_out_a_stall_is_stamped_late():
    d = duplex(EventThenStall(block_at=3))
    await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
    # the push caught up after the stall without sleeping: the reader reads the event now,
    # before close cancels it
    await asyncio.sleep(0)
    rec = await d.close()
    # whichever of the event and the ticker's late wake-up the loop handles first (both
    # orders: test_the_monitor_reads_stalls_from_tick_times), the stamp is counted late
    assert rec.clock["output_lag_max_ms"] > 0, rec.clock
    assert max(rec.clock["output_lag_max_ms"], rec.clock["loop_stall_max_ms"]) >= \
        (BLOCK_S - 2 * TICK_S - 0.005) * 1000, rec.clock


@pytest.mark.asyncio
async def test_over_the_tolerance_a_session_stops_at_once():
    token = clock.TOLERANCE.set(0.1)
    try:
        d = duplex(BlockingSession(block_at=2))
        with pytest.raises(TrialLate, match="late|stalled"):
            await d.push(np.zeros(int(2.0 * SAMPLE_RATE), np.float32))
        assert d.now < 1.0  # it did not stream the remaining second and more
    finally:
        clock.TOLERANCE.reset(token)


def test_the_monitor_reads_stalls_from_tick_times():
    loop = asyncio.new_event_loop()
    mon = LoopMonitor(loop)
    late = Lateness()
    mon._watchers.append(late)
    mon.tick(now=1.0, due=0.99)
    assert mon.late(1.005) == pytest.approx(0.01)  # just after a tick 10 ms late: that much
    assert mon.late(1.012) == pytest.approx(0.002)  # past one period: the time beyond it
    # an event handled before the ticker's late wake-up: the stall so far
    assert mon.late(1.25) == pytest.approx(0.24)
    # ... or just after it, in the same pass: the stall that tick measured
    mon.tick(now=1.3, due=1.01)
    assert late.stall == pytest.approx(0.29) and mon.late(1.301) == pytest.approx(0.29)
    assert describe(Lateness(input=0.24, stall=0.1).to_dict()) == "input 240 ms late"
    loop.close()


def test_admission_sees_an_input_lag_once_when_it_is_reached(monkeypatch):
    loop = asyncio.new_event_loop()
    mon = LoopMonitor(loop)
    monkeypatch.setattr(mon, "recent_stall", lambda: 0.0)  # the loop itself kept up
    a, b = Lateness(), Lateness()
    mon._watchers += [a, b]
    assert mon.recent_lateness() == 0.0
    a.input = 0.08  # a chunk held back (a slow send), the ticker punctual
    assert mon.recent_lateness() == pytest.approx(0.08)
    assert mon.recent_lateness() == 0.0  # a running maximum: only a new one is fresh
    a.input, b.input = 0.09, 0.03
    assert mon.recent_lateness() == pytest.approx(0.09)
    monkeypatch.setattr(mon, "recent_stall", lambda: 0.2)
    assert mon.recent_lateness() == pytest.approx(0.2)  # the stall, when larger
    loop.close()


def test_the_registry_does_not_keep_a_finished_loop_alive():
    import gc
    import weakref

    loop = asyncio.new_event_loop()
    LoopMonitor.of(loop)
    gone = weakref.ref(loop)
    loop.close()
    del loop
    gc.collect()
    assert gone() is None


# --- the guard (run/harness.py), below the wall clock ---------------------------------------

def _recording(**lag_ms) -> Recording:
    clock_ = {"input_lag_max_ms": 0.0, "output_lag_max_ms": 0.0, "loop_stall_max_ms": 0.0}
    clock_.update(lag_ms)
    return Recording(input=np.zeros(16), output=np.zeros(16), clock=clock_,
                     usage={"sessions": 1})


def _trials(*results):
    calls = []

    async def trial():
        calls.append(1)
        r = results[min(len(calls), len(results)) - 1]
        if isinstance(r, Exception):
            raise r
        return r
    return trial, calls


def _guard(tmp_path, trial, tolerance=0.1):
    return asyncio.run(Harness(model=None, run_dir=tmp_path,
                               timing_tolerance=tolerance)._on_time(trial))


def test_a_late_trial_is_run_again_and_only_the_on_time_one_is_kept(tmp_path):
    trial, calls = _trials(_recording(input_lag_max_ms=240.0),
                           TrialLate({"loop_stall_max_ms": 400.0}), _recording())
    rec = _guard(tmp_path, trial)
    assert len(calls) == 3
    assert rec.clock == {"input_lag_max_ms": 0.0, "output_lag_max_ms": 0.0,
                         "loop_stall_max_ms": 0.0, "tolerance_ms": 100.0, "reruns": 2,
                         "unreliable": False}
    assert rec.usage == {"sessions": 2}  # both recorded attempts were billed


def test_a_trial_late_on_every_attempt_is_timing_unreliable(tmp_path):
    trial, calls = _trials(_recording(input_lag_max_ms=240.0))
    with pytest.raises(TimingUnreliable) as err:
        _guard(tmp_path, trial)
    assert len(calls) == TIMING_RERUNS + 1
    assert str(err.value).startswith("timing unreliable: input 240 ms late")
    assert "lower --duplexact-concurrency or free the machine" in str(err.value)
    assert err.value.clock["unreliable"] is True and err.value.clock["reruns"] == TIMING_RERUNS


def test_without_a_tolerance_lateness_is_only_recorded(tmp_path):
    trial, calls = _trials(_recording(input_lag_max_ms=240.0))
    rec = _guard(tmp_path, trial, tolerance=None)
    assert len(calls) == 1 and rec.clock["reruns"] == 0 and rec.clock["tolerance_ms"] is None


def test_a_stepped_trial_has_no_clock_and_is_never_rerun(tmp_path):
    stepped = Recording(input=np.zeros(16), output=np.zeros(16))
    trial, calls = _trials(stepped)
    assert _guard(tmp_path, trial).clock is None and len(calls) == 1
