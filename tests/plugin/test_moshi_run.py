"""`pytest --duplexact-model=moshi` end to end on bundled instances, one per pipeline (direct,
simulator, barge-in), with a tiny random checkpoint written by tests/models/providers/moshi_tiny.py and
loaded through the adapter's real options. Two runs with one seed give the same bytes for the
simulator's instance; different inputs give different outputs. Each recording keeps the frame
clock through its pipeline: output as long as input, audible, and the native words in order from
the LM's two-frame delay on (this run carries that check for tests/models/providers/test_moshi.py
too: one set of moshi trials instead of two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data.recording_io import load_recording, track_file

pytest.importorskip("moshi", reason="moshi is installed by .ci/run (pip install --no-deps)")

pytestmark = pytest.mark.slow

CONDITIONS = "take_turn.immediate,stop.direct_interruption,interrupt.help"


@pytest.fixture(scope="module")
def model_args(tmp_path_factory):
    from tests.models.providers.moshi_tiny import write_checkpoints

    options = dict(write_checkpoints(tmp_path_factory.mktemp("moshi-tiny")), device="cpu",
                   threads="1")
    return [f"--duplexact-model-option={k}={v}" for k, v in options.items()]


def _start(pytester, model_args, run_dir: str, conditions: str = CONDITIONS) -> subprocess.Popen:
    args = ["--duplexact-model=moshi", *model_args, f"--duplexact-condition={conditions}",
            "--duplexact-limit=1", "--duplexact-transcriber=native",
            f"--duplexact-run-dir={run_dir}", "-p", "no:cacheprovider", "-q"]
    return subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=pytester.path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# the second run repeats only the simulator's instance: the pipeline whose input depends on
# what the model said (the cue reacts to its speech), so the one where any nondeterminism
# would show; a third of the CPU of repeating all three
AGAIN = "stop.direct_interruption"


def test_moshi_runs_every_pipeline_deterministically(pytester, model_args):
    # two runs with one seed, in parallel: separate processes, the same bytes
    runs = [_start(pytester, model_args, "one"), _start(pytester, model_args, "two", AGAIN)]
    logs = [p.communicate(timeout=300)[0] for p in runs]
    rep, again = (json.loads(Path(pytester.path, d, "report.json").read_text())
                  for d in ("one", "two"))
    assert rep["totals"] == {"instances": 3, "errors": 0}, logs[0]
    assert again["totals"] == {"instances": 1, "errors": 0}, logs[1]
    assert {i["action"] for i in rep["instances"]} == {"take_turn", "stop", "interrupt"}
    outputs = {}
    for inst in rep["instances"]:
        one = Path(pytester.path, "one", inst["recording"])
        rec = json.loads((one / "recording.json").read_text())
        assert rec["transcript"], inst["id"]  # the native text stream reached the recording
        outputs[inst["id"]] = track_file(one, "output").read_bytes()
        # through each stepped pipeline: the output track as long as the input, not silent;
        # the words from frame 2 on (the LM's delay: 0.16 s) to the end, in time order
        got = load_recording(one)
        assert len(got.output) == len(got.input) and np.abs(got.output).max() > 0, inst["id"]
        assert all(0.16 - 1e-9 <= w.start < got.duration for w in got.transcript), inst["id"]
        assert list(got.transcript) == sorted(got.transcript, key=lambda w: w.start)
    [repeated] = again["instances"]
    two = Path(pytester.path, "two", repeated["recording"])
    one = Path(pytester.path, "one", repeated["recording"])
    assert track_file(two, "output").read_bytes() == outputs[repeated["id"]]
    assert json.loads((two / "recording.json").read_text())["transcript"] == \
        json.loads((one / "recording.json").read_text())["transcript"]
    assert repeated["immediate"]["verdict"] == \
        {i["id"]: i for i in rep["instances"]}[repeated["id"]]["immediate"]["verdict"]
    # every trial starts from the same seeds, so different outputs come from different inputs
    assert len(set(outputs.values())) == 3


def test_missing_checkpoint_fails_before_any_instance(pytester):
    res = pytester.runpytest_subprocess(
        "--duplexact-model=moshi", "--duplexact-model-option=mimi_weights=nope.safetensors",
        "--duplexact-model-option=lm_weights=hf://kyutai/moshiko-pytorch-bf16/model.safetensors",
        "--duplexact-model-option=tokenizer=nope.model", "--duplexact-run-dir=run",
        "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "model 'moshi' cannot run here" in err and "nothing is downloaded" in err
    assert "no such file 'nope.model'" in err
    assert not Path(pytester.path, "run", "instances").exists()
