"""Batched stepping through a bridge (bridges/kit.py BatchStepper, models/bridge.py): a stepped bridge model
with ``step_batch`` gets one call per tick for every open trial; ``--duplexact-batch=B`` of the
client opens B connections and sends every slot's frame before it waits, so B trials share a
step, and each trial hears exactly what it hears alone. One trial's failure stays its own."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.models import is_batched, resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.pipelines import run_instance
from tests.bridges.support import served
from tests.pipelines.helpers import direct_instance, run
from tests.pipelines.test_lockstep import lockstep, same


class Session:
    def __init__(self, trial):
        self.k, self.fails = 0, "interrupt" in trial.id

    def answer(self, frame):
        k, self.k = self.k, self.k + 1
        if self.fails and k == 7:
            raise RuntimeError("this trial's slot failed")
        return (0.5 * frame, " hello" if k == 10 else ())

    step = answer

    def close(self):
        pass


class Halves:
    """Says its input back at half the level; the word "hello" at step 10."""

    name, mode, transcript = "halves", "stepped", True
    sample_rate, frame = 16_000, 1_280  # 80 ms
    max_sessions = 3

    def open(self, options, trial):
        return Session(trial)

    def step_batch(self, steps):
        out = []
        for session, frame in steps:
            try:
                out.append(session.answer(frame))
            except Exception as e:  # that trial's error alone
                out.append(e)
        return out


@pytest.fixture(scope="module")
def server():
    with served(Halves()) as s:
        yield s


def test_trials_share_the_bridges_steps_and_hear_what_they_hear_alone(server, tmp_path):
    insts = [direct_instance(tmp_path, a, c) for a, c in
             [("take_turn", "delayed"), ("wait", "intra_sentential_pause"),
              ("backchannel", "affirmative"), ("take_turn", "immediate")]]
    client = resolve_model("bridge", url=server.url)
    assert is_batched(client)
    alone = [run(run_instance(i, client, SessionInfo(i))) for i in insts]
    assert set(server.stepper.calls) == {1}  # one trial at a time: one per call
    server.stepper.calls.clear()
    got, _ = run(lockstep(client, insts, 3))
    assert all(same(a, b) for a, b in zip(alone, got))
    assert alone[0].transcript[0].text == "hello"
    # three trials per model call (the fourth took a slot as one ended)
    assert max(server.stepper.calls) == 3


def test_one_trials_failure_behind_the_bridge_is_its_own(server, tmp_path):
    insts = [direct_instance(tmp_path, "take_turn", "delayed"),
             direct_instance(tmp_path, "interrupt", "help")]
    got, _ = run(lockstep(resolve_model("bridge", url=server.url), insts, 2))
    assert not isinstance(got[0], BaseException) and np.abs(got[0].output).max() > 0
    assert isinstance(got[1], ModelError) and "this trial's slot failed" in str(got[1])

