"""silent: digital silence on every pipeline, and fast."""

import time

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.models import resolve_model
from pytest_duplexact.pipelines import run_instance

from pipelines.helpers import instance_for, run


@pytest.mark.parametrize("action", taxonomy.ACTIONS)
def test_silent_on_every_pipeline(tmp_path, action):
    inst = instance_for(tmp_path, taxonomy.conditions_of(action)[0])
    t = time.perf_counter()
    rec = run(run_instance(inst, resolve_model("silent")))
    elapsed = time.perf_counter() - t
    assert not rec.output.any() and rec.transcript == ()
    assert len(rec.output) == len(rec.input) and rec.duration > 14.0
    assert elapsed < 1.0, f"{elapsed:.2f} s for {rec.duration:.1f} s of audio"
