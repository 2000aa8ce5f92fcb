"""Every session a trial opened is billed, also those the timing guard stopped (TrialLate)
and those of a trial that ended timing unreliable: two sessions reporting 150 tokens each
cost 300, not 150 (run/harness.py, pipelines/__init__.py ``run_instance``)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytest_duplexact.data import usage
from pytest_duplexact.data.recording import Recording
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.pipelines.clock import TimingUnreliable, TrialLate
from pytest_duplexact.pipelines.duplex import Duplex
from pytest_duplexact.run.harness import TIMING_RERUNS, Harness
from tests.support.builders import make_instance

TOKENS = {"input_tokens": 150}
LATE = {"input_lag_max_ms": 0.0, "output_lag_max_ms": 0.0, "loop_stall_max_ms": 400.0}
ON_TIME = {"input_lag_max_ms": 0.0, "output_lag_max_ms": 0.0, "loop_stall_max_ms": 1.0}


class Session(Duplex):
    """One billed session: 150 tokens, stopped by the guard (``late``) or on time."""

    def __init__(self, late: bool):
        self.late, self.events, self._now, self.usage = late, [], 0.0, {}

    @property
    def now(self) -> float:
        return self._now

    async def push(self, samples):
        self._now += len(samples) / 16000
        if self.late:
            raise TrialLate(dict(LATE))

    def heard(self):
        return np.zeros(int(self._now * 16000), np.float32)

    def transcript(self):
        return []

    async def close(self) -> Recording:
        self.usage = dict(TOKENS)  # what the provider reported, read at close
        n = int(self._now * 16000)
        return Recording(input=np.zeros(n, np.float32), output=np.zeros(n, np.float32),
                         usage=self.usage, clock=dict(ON_TIME))


class Model:
    """A model across a network (``retries_transient``): each call is one session; the
    first ``late`` of them are stopped by the guard."""

    retries_transient = True

    def __init__(self, late: int):
        self.late, self.sessions = late, 0

    def __call__(self, info):
        self.sessions += 1
        return Session(late=self.sessions <= self.late)


@pytest.fixture
def instance(tmp_path):
    return make_instance(tmp_path / "data", "take_turn", "immediate",
                         {"user": np.zeros(1600, np.float32)})


def test_a_session_stopped_by_the_guard_is_billed_with_the_one_kept(tmp_path, instance):
    model = Model(late=1)
    harness = Harness(model=model, run_dir=tmp_path / "run", timing_tolerance=0.1)
    rec = asyncio.run(harness._on_time(
        lambda: run_instance(instance, model, SessionInfo(instance))))
    assert model.sessions == 2 and rec.clock["reruns"] == 1
    assert rec.usage == {"input_tokens": 300}


def test_a_timing_unreliable_trial_bills_every_attempt(tmp_path, instance):
    model = Model(late=99)
    harness = Harness(model=model, run_dir=tmp_path / "run", timing_tolerance=0.1)
    before = usage.snapshot(harness)
    with pytest.raises(TimingUnreliable):
        harness.run(instance)
    assert model.sessions == TIMING_RERUNS + 1
    spent = usage.delta(usage.snapshot(harness), before)
    assert spent["model"]["input_tokens"] == 150 * (TIMING_RERUNS + 1)


def test_a_stopped_attempts_error_leaves_no_reference_cycle(tmp_path, instance):
    """Its traceback's frames hold the duplex that holds the error: left in place, every
    re-run is cyclic garbage for a full collection, which stalls every live session."""
    import gc
    import weakref

    raised: list[weakref.ref] = []

    class Late(Session):
        async def push(self, samples):
            self._failure = TrialLate(dict(LATE))  # kept, as the streaming duplex keeps it
            raised.append(weakref.ref(self._failure))
            raise self._failure

    calls = []

    def model(info):
        calls.append(1)
        return Late(True) if len(calls) == 1 else Session(False)

    model.retries_transient = True
    harness = Harness(model=model, run_dir=tmp_path / "run", timing_tolerance=0.1)
    gc.disable()  # only reference counting may free it
    try:
        rec = asyncio.run(harness._on_time(
            lambda: run_instance(instance, model, SessionInfo(instance))))
        assert rec.clock["reruns"] == 1
        assert raised and raised[0]() is None
    finally:
        gc.enable()
