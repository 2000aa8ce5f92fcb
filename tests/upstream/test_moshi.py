"""Kyutai's own moshi code (kyutai-labs/moshi: the ``moshi`` package of the checkout, first on
the bridge's ``PYTHONPATH``: ``LMGen``, Mimi, their loaders and lazy compilation) with tiny
random weights on CPU, behind our moshi bridge (bridges/moshi_bridge.py) started with the command
docs/models.md prints, driven by the plugin's bridge client and pipelines
(tests/upstream/bridged.py).

Environment: ``$DUPLEXACT_UPSTREAM_DIR/kyutai-labs+moshi.venv`` if present, else this
interpreter (torch 2.13 CPU with moshi's model dependencies, as .ci/run installs them).
Stubbed: nothing of moshi's code; the weights are random and tiny (tests/models/providers/moshi_tiny.py).
torch.compile stays on: the bridge's warm-up takes moshi's lazy compile before it listens.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.upstream.bridged import (
    drive,
    filled,
    instances,
    printed_command,
    started,
    warmup_seconds,
)
from tests.upstream.support import Checkout, checkout, record_row

REPO = "kyutai-labs/moshi"
# the tiny LM's delays (moshi's _lm_kwargs) hold its first audio one step; the answer to
# frame k is heard in frame k + 1 (models/moshi.py): first audio in frame 2
FIRST_AUDIO_S = 2 * 0.08

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


@pytest.fixture(scope="module")
def moshi() -> Checkout:
    ck = checkout(REPO)
    pytest.importorskip("moshi", reason="the tiny checkpoint is written with moshi's loaders")
    return ck


def code_path(ck: Checkout) -> list:
    return [ck.path / "moshi"]  # the checkout's package, not an installed copy


def test_the_bridge_runs_the_checkouts_moshi(moshi):
    env = dict(os.environ, PYTHONPATH=str(code_path(moshi)[0]))
    where = subprocess.run([moshi.python, "-c", "import moshi; print(moshi.__file__)"],
                           capture_output=True, text=True, check=True, env=env).stdout
    assert where.startswith(str(moshi.path)), where


def test_moshi_behind_the_printed_bridge_command(moshi, tmp_path):
    from pytest_duplexact.models import resolve_model
    from tests.models.providers.moshi_tiny import write_checkpoints

    files = write_checkpoints(tmp_path / "ckpt")
    argv = filled(printed_command("moshi_bridge"), moshi.python,
                  {"--host": "127.0.0.1", "--port": "0", "--mimi-weights": files["mimi_weights"],
                   "--lm-weights": files["lm_weights"], "--tokenizer": files["tokenizer"]},
                  ["--lm-config", files["lm_config"], "--mimi-config", files["mimi_config"],
                   "--device", "cpu", "--threads", "1"])
    with started(argv, code_path(moshi), what="the moshi bridge") as served:
        warm = warmup_seconds(served)  # moshi's lazy compile, before it listened

        def client():  # connects, READY checked
            model = resolve_model("bridge", url=served.url)
            assert model.name == "moshi"
            return model

        m = drive(served, client, instances(tmp_path), FIRST_AUDIO_S)
    record_row("moshi", moshi, connects=True, **m.row(), barge_in_stop=None, sessions=1,
               notes=f"tiny random weights; warm-up {warm:.1f} s before listening; "
                     "barge-in cues played over its speech, a random model's stop is not a "
                     "decision to measure")
