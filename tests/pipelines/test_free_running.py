"""Stepped sessions run free: stretches with no online decision are pushed whole and a model
with ``step_many`` gets many frames per call; the recordings are exactly what 40 ms pushes
and one ``step`` per frame give (pipelines/stepped.py, pipelines/direct.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.providers.oracle import OracleModel
from pytest_duplexact.models.providers.silent import SilentModel
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from pytest_duplexact.rules import requires
from tests.pipelines.helpers import run


class ChunkedDuplex(SteppedDuplex):
    free_running = False  # every stretch in 40 ms pushes, as a streaming session gets it


class FrameBySilent(SilentModel):
    step_many = None  # one step per frame


class RampModel:
    """Audio that depends on every input sample and frame index (a 24 kHz model)."""

    sample_rate, frame_size = 24_000, 480

    def start(self, info):
        self.k = 0

    def step(self, frame):
        self.k += 1
        return (np.tanh(frame * 3) + 1e-4 * self.k).astype(np.float32)

    def step_many(self, frames):
        out = [self.step(f) for f in frames]
        return np.stack(out)

    def finish(self):
        pass


class FrameByRamp(RampModel):
    step_many = None


@pytest.fixture(scope="module")
def instances():
    ds = load_dataset(bundled_root(), requires=requires)
    return [ds.by_condition(*c)[0] for c in (("take_turn", "immediate"), ("hold_floor",
            "continue"), ("interrupt", "help"), ("recover", "repeat"))]


def same(a, b) -> None:
    assert np.array_equal(a.input, b.input) and np.array_equal(a.output, b.output)
    assert a.transcript == b.transcript and a.events == b.events and a.cue == b.cue


@pytest.mark.parametrize("make", [OracleModel, SilentModel, RampModel])
def test_whole_pushes_and_step_many_record_what_40_ms_steps_record(instances, make):
    slow = {SilentModel: FrameBySilent, RampModel: FrameByRamp}.get(make, make)
    for inst in instances:
        fast = run(run_instance(inst, make(), SessionInfo(inst)))
        chunked = run(run_instance(inst, lambda info: ChunkedDuplex(slow(), info)))
        same(fast, chunked)


class Loud(SilentModel):
    """Overrides step only: its inherited step_many must not bypass it."""

    def step(self, frame):
        return np.full(self.frame_size, 0.1, np.float32)


def test_an_overridden_step_is_not_bypassed_by_an_inherited_step_many(instances):
    rec = run(run_instance(instances[0], Loud(), SessionInfo(instances[0])))
    assert np.all(rec.output == np.float32(0.1))


class Broken(SilentModel):
    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def step_many(self, frames):
        return self.answer(len(frames))


@pytest.mark.parametrize("answer,msg", [
    (lambda n: np.zeros((n, 319), np.float32), "returned .* from step_many"),
    (lambda n: np.full((n, 320), np.nan, np.float32),
     r"non-finite samples \(NaN or inf\) from step_many"),
    (lambda n: 1 / 0, "failed in step_many .* ZeroDivisionError"),
])
def test_a_bad_step_many_answer_is_a_model_error(instances, answer, msg):
    with pytest.raises(ModelError, match=msg):
        run(run_instance(instances[0], Broken(answer), SessionInfo(instances[0])))
