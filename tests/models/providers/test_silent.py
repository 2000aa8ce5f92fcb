"""silent: digital silence on every pipeline. How fast it runs is a figure of
benchmarks/harness_performance.py (stepped throughput), not a verdict: a loaded machine is slow."""

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.models import resolve_model
from pytest_duplexact.pipelines import run_instance
from tests.pipelines.helpers import instance_for, run


@pytest.mark.parametrize("action", taxonomy.ACTIONS)
def test_silent_on_every_pipeline(tmp_path, action):
    inst = instance_for(tmp_path, taxonomy.conditions_of(action)[0])
    rec = run(run_instance(inst, resolve_model("silent")))
    assert not rec.output.any() and rec.transcript == ()
    assert len(rec.output) == len(rec.input) and rec.duration > 14.0
