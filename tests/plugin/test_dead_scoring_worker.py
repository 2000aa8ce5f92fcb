"""A scoring worker killed on a trial (run/offload.py): pytest reports it in a few lines
naming what happened, not a 60-line traceback with the Recording(...) repr; the trial's
recording is kept, and a resume scores it from that recording without calling the model."""

from __future__ import annotations

import json
from pathlib import Path

CONFTEST = '''
import os

import pytest_duplexact.run.harness as harness
import pytest_duplexact.run.offload as offload


def die(*args):  # the worker's job, by reference: the worker dies as if killed
    os._exit(9)


_from_settings = harness.Harness.from_settings.__func__


def from_settings(cls, *args, **kw):
    h = _from_settings(cls, *args, **kw)
    if os.environ.get("KILL_THE_WORKER"):  # as a streaming run with trials in flight has
        h.scoring_worker = offload.ScoringWorker()
        offload._write_and_detect = offload._write_and_segment = die
    return h


harness.Harness.from_settings = classmethod(from_settings)
'''

ARGS = ("--duplexact-model=oracle", "--duplexact-condition=take_turn.immediate",
        "--duplexact-limit=1", "-p", "no:cacheprovider")


def test_a_killed_worker_is_a_short_error_and_its_recording_is_rescored(pytester,
                                                                         monkeypatch):
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("KILL_THE_WORKER", "1")
    res = pytester.runpytest_subprocess(*ARGS, "--duplexact-run-dir=run", timeout=240)
    out = res.stdout.str()
    assert res.ret == 1, out
    assert "Recording(" not in out and "Traceback" not in out, out
    # the outcome is made in the instance's fixture: an error at setup
    failure = out.split("= ERRORS =")[1].split("DuplexAct results")[0].strip().splitlines()
    assert len(failure) <= 6, failure  # the header, the message, where the traceback is
    assert any("ScoringWorkerError: the scoring worker died on instance" in x
               for x in failure), failure
    assert any("its recording is kept in instances/" in x for x in failure), failure
    (folder,) = Path(pytester.path, "run", "instances").iterdir()
    assert {"output.flac", "input.flac", "recording.json"} <= {p.name for p in folder.iterdir()}
    monkeypatch.delenv("KILL_THE_WORKER")
    again = pytester.runpytest_subprocess(*ARGS, "--duplexact-resume=run", timeout=240)
    said = again.stdout.str()
    assert "1 scored again from the recording kept when the scoring worker died" in said, said
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    assert rep["totals"]["errors"] == 0 and rep["instances"][0]["immediate"] is not None
