"""run_instance: one pipeline per taxonomy pipeline, factories, recorded bypass, errors."""

import numpy as np
import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.pipelines import (
    BargeInReplay,
    DirectReplay,
    SimulatorReplay,
    pipeline_for,
    run_instance,
)
from pytest_duplexact.pipelines.duplex import Recording
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import ScriptedModel, instance_for, run

KINDS = {taxonomy.Pipeline.DIRECT: DirectReplay, taxonomy.Pipeline.SIMULATOR: SimulatorReplay,
         taxonomy.Pipeline.BARGE_IN: BargeInReplay}


@pytest.mark.parametrize("cond", taxonomy.CONDITIONS, ids=lambda c: c.key)
def test_dispatch_by_taxonomy_pipeline(tmp_path, cond):
    assert isinstance(pipeline_for(instance_for(tmp_path, cond)), KINDS[cond.pipeline])


def test_recording_shape_per_pipeline(tmp_path):
    model = ScriptedModel([(2.7, 6.0)])
    for action in ("take_turn", "stop", "interrupt"):
        inst = instance_for(tmp_path, taxonomy.conditions_of(action)[0])
        rec = run(run_instance(inst, model, SessionInfo(inst, seed=3)))
        assert (rec.cue is not None) == (action == "stop")
        assert (rec.user_sent_until is not None) == (action == "interrupt")
    assert model.started == model.finished == 3


def test_a_duplex_factory_is_accepted(tmp_path):
    inst = instance_for(tmp_path, taxonomy.conditions_of("wait")[0])
    seen = []

    async def factory(info):
        seen.append(info)
        return SteppedDuplex(ScriptedModel(), info)

    rec = run(run_instance(inst, factory))
    assert seen[0].instance is inst and isinstance(rec, Recording)


class Recorded:
    def __init__(self, rec):
        self.rec = rec

    def recording_for(self, instance):
        return self.rec


def test_recorded_models_bypass_the_pipelines(tmp_path):
    inst = instance_for(tmp_path, taxonomy.conditions_of("stop")[0])
    stored = Recording(np.zeros(10, np.float32), np.zeros(10, np.float32))
    assert run(run_instance(inst, Recorded(stored))) is stored


class Explodes(ScriptedModel):
    def step(self, frame):
        if self.k == 100:
            raise ValueError("boom")
        return super().step(frame)


def test_model_error_propagates_and_the_session_is_finished(tmp_path):
    inst = instance_for(tmp_path, taxonomy.conditions_of("recover")[0])
    model = Explodes()
    with pytest.raises(ModelError, match=r"recover-wrap_up at 2\.00 s: ValueError: boom"):
        run(run_instance(inst, model))
    assert model.finished == 1


def test_info_for_another_instance_is_refused(tmp_path):
    a = instance_for(tmp_path, taxonomy.conditions_of("wait")[0])
    b = instance_for(tmp_path, taxonomy.conditions_of("ignore")[0])
    with pytest.raises(ValueError, match="SessionInfo is for instance"):
        run(run_instance(a, ScriptedModel(), SessionInfo(b)))
