"""DirectReplay: the user clip, then exactly the observation period, on one clock."""

import numpy as np
import pytest

from pytest_duplexact.data.taxonomy import OBSERVATION_PERIOD_S
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines.direct import DirectReplay, push_in_chunks
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, ScriptedModel, direct_instance, run


@pytest.mark.parametrize("chunk_s", [0.02, 0.04, 0.1])
def test_lengths_and_content(tmp_path, chunk_s):
    inst = direct_instance(tmp_path, "wait", "continuous_speech")
    user = inst.clip("user").load()
    model = ScriptedModel([(1.0, 2.0)])
    rec = run(DirectReplay(chunk_s=chunk_s).run(SteppedDuplex(model, SessionInfo(inst)), inst))
    assert len(rec.input) == len(user) + round(OBSERVATION_PERIOD_S * SR)
    np.testing.assert_array_equal(rec.input[: len(user)], user)
    assert not rec.input[len(user):].any()
    assert len(rec.output) == len(rec.input)
    assert rec.duration == pytest.approx(inst.clip("user").duration + OBSERVATION_PERIOD_S)
    assert rec.cue is None and rec.user_sent_until is None
    assert rec.events == [(pytest.approx(len(user) / SR), "user_audio_end")]
    assert set(model.frames) == {320}


def test_push_in_chunks_respects_chunk_size(tmp_path):
    sizes = []

    class Probe:
        async def push(self, samples):
            sizes.append(len(samples))

    run(push_in_chunks(Probe(), np.zeros(1000, np.float32), 0.02))
    assert sizes == [320, 320, 320, 40]
