"""A resumed trial is judged against the tolerance of the run that reports it: a run with
``--duplexact-timing-tolerance=off`` and a stalled loop stores a trial ~400 ms late as
scored; resumed at the default tolerance, that trial is run again (and, still stalling,
ends timing unreliable), never counted in a rate, and the report states 100 ms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugin.test_timing_guard_run import STALL_MODEL

ARGS = ("--duplexact-model=stall_model:factory", "--duplexact-condition=take_turn.immediate",
        "--duplexact-limit=1", "-p", "no:cacheprovider")


@pytest.mark.slow
def test_a_resume_at_the_default_tolerance_runs_a_late_trial_again(pytester):
    pytester.makepyfile(stall_model=STALL_MODEL)
    first = pytester.runpytest_subprocess(*ARGS, "--duplexact-run-dir=run",
                                          "--duplexact-timing-tolerance=off", timeout=240)
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    (inst,) = rep["instances"]
    assert inst["error"] is None and inst["immediate"] is not None, first.stdout.str()
    assert max(inst["clock"]["input_lag_max_ms"], inst["clock"]["loop_stall_max_ms"]) >= 300
    assert rep["clock"]["tolerance_ms"] is None
    res = pytester.runpytest_subprocess(*ARGS, "--duplexact-resume=run", timeout=240)
    out = res.stdout.str()
    assert "1 over this run's timing tolerance, re-run" in out, out
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    (inst,) = rep["instances"]
    assert inst["immediate"] is None and inst["error"].startswith("TimingUnreliable"), inst
    assert rep["clock"]["tolerance_ms"] == 100.0
    assert rep["clock"]["worst_scored_lag_ms"] is None  # no scored trial over 100 ms
