"""The moshi bridge (bridges/moshi_bridge.py) on the tiny random checkpoint the moshi tests write,
built by its own command line (``add_arguments`` + ``build``) and served by the real kit on
127.0.0.1: through the bridge client a trial is the in-process adapter's trial for the same
seed, sample for sample and word for word (so are its scores). The same loaded model serves
both routes, one after the other (loading costs more than the trials)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.bridges import parser
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.bridges.support import served
from tests.pipelines.helpers import cat, gap, run, tone
from tests.support.builders import make_instance

pytest.importorskip("moshi", reason="moshi is installed by .ci/run (pip install --no-deps)")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from tests.models.providers.moshi_tiny import write_checkpoints

    return write_checkpoints(tmp_path_factory.mktemp("moshi-tiny"))


def trial(model, instance, seed: int):
    async def go():
        return await DirectReplay(observation_s=0.3).run(
            SteppedDuplex(model, SessionInfo(instance, seed=seed)), instance)

    return run(go())


@pytest.mark.slow
def test_the_moshi_bridge_reports_what_the_in_process_adapter_does(checkpoints, tmp_path):
    from pytest_duplexact.bridges.moshi_bridge import PROG, add_arguments, build

    p = parser(PROG)
    add_arguments(p)
    args = p.parse_args([a for k, v in checkpoints.items()
                         for a in ("--" + k.replace("_", "-"), str(v))] +
                        ["--device", "cpu", "--threads", "1"])
    bridge = build(args)  # the checkpoint loaded once, as `python -m ...` does
    # 1.5 s in all: the tiny model steps at ~0.1 s a frame on a loaded CPU
    instance = make_instance(tmp_path, "take_turn", "immediate",
                             {"user": cat(gap(0.2), tone(1.0))}, {"user_start": 0.2})
    local = trial(bridge.model, instance, seed=7)  # the in-process adapter's MoshiModel
    stepped = []
    step_piece = bridge.model.step_piece
    bridge.model.step_piece = lambda frame: (stepped.append(1), step_piece(frame))[1]
    with served(bridge) as server:
        # warmed up before it listened (moshi compiles at its first step): 4 frames, as
        # Kyutai's server; the trial below starts afresh all the same
        assert server.warmup_s is not None and len(stepped) == 4
        model = resolve_model("bridge", url=server.url)
        assert (model.sample_rate, model.frame_size, model.name) == (24_000, 1_920, "moshi")
        through = trial(model, instance, seed=7)
    assert np.abs(local.output).max() > 0 and local.transcript
    np.testing.assert_array_equal(through.output, local.output)
    assert through.transcript == local.transcript
