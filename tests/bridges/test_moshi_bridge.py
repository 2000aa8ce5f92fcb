"""The moshi bridge (``python -m pytest_duplexact.bridges.moshi``, its own process) on the tiny
random checkpoint the moshi tests write: through the bridge client, a trial is the in-process
adapter's trial for the same seed, sample for sample and word for word (so are its scores)."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.base import SessionInfo
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.stepped import SteppedDuplex

from pipelines.helpers import cat, gap, make_instance, run, tone

pytest.importorskip("moshi", reason="moshi is installed by .ci/run (pip install --no-deps)")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from models.moshi_tiny import write_checkpoints

    return write_checkpoints(tmp_path_factory.mktemp("moshi-tiny"))


@contextmanager
def moshi_bridge(checkpoints: dict):
    args = [a for k, v in checkpoints.items() for a in ("--" + k.replace("_", "-"), str(v))]
    proc = subprocess.Popen([sys.executable, "-m", "pytest_duplexact.bridges.moshi", *args,
                             "--device", "cpu", "--threads", "1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def started() -> str:
        line = proc.stdout.readline()
        m = re.search(r"listening on (ws://\S+)", line)
        assert m, (line, proc.communicate(timeout=30)[1][-3000:] if not line else "")
        assert "model moshi: stepped, 24000 Hz, 1920-sample frames, transcript yes" in line
        return m.group(1)

    try:
        yield started
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()


def trial(model, instance, seed: int):
    async def go():
        return await DirectReplay(observation_s=0.3).run(
            SteppedDuplex(model, SessionInfo(instance, seed=seed)), instance)

    return run(go())


def test_the_moshi_bridge_reports_what_the_in_process_adapter_does(checkpoints, tmp_path):
    # 1.5 s in all: the tiny model steps at ~0.1 s a frame on a loaded CPU
    instance = make_instance(tmp_path, "take_turn", "immediate",
                             {"user": cat(gap(0.2), tone(1.0))}, {"user_start": 0.2})
    with moshi_bridge(checkpoints) as started:  # loads in its process while this one runs
        local = trial(resolve_model("moshi", **checkpoints, device="cpu", threads="1"),
                      instance, seed=7)
        model = resolve_model("bridge", url=started())
        assert (model.sample_rate, model.frame_size, model.name) == (24_000, 1_920, "moshi")
        through = trial(model, instance, seed=7)
    assert np.abs(local.output).max() > 0 and local.transcript
    np.testing.assert_array_equal(through.output, local.output)
    assert through.transcript == local.transcript
