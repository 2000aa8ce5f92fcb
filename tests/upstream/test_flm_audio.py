"""FLM-Audio's own model code (cofe-ai/flm-audio: ``FLMAudioForCausalLM``, ``LMGen``, Mimi and
``get_mimi``, its sampler) with tiny random weights on CPU, behind our bridge
(bridges/flm_audio.py) started with the command docs/models.md prints, driven by the plugin's
bridge client and pipelines (tests/upstream/bridged.py).

Environment: ``$DUPLEXACT_UPSTREAM_DIR/cofe-ai+flm-audio.venv`` (else this interpreter) with
torch 2.13 (CPU), transformers 4.51.3, accelerate, einops, safetensors, huggingface_hub,
numpy, websockets. Stubbed: nothing of the model's code; the weights are random and tiny
(``stubs/flm_audio/build.py``: a 2-layer, 64-dim LM and depth transformer written by
``save_pretrained``, a word-level tokenizer), and Mimi's architecture, hard-coded in
``loaders.py``, is shrunk in place when that module is imported
(``stubs/flm_audio/sitecustomize.py``). ``TORCH_COMPILE_DISABLE=1``: ``LMGen`` compiles the LM
when streaming starts, which on CPU only costs time (the warm-up is measured in
benchmarks, not here). FLM-Audio's HEAD cannot generate unpatched (docs/models.md): the
bridge's refusals are checked against it, then it runs with ``--workaround all``, as printed.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.bridges.model_support import ROOT
from tests.upstream.bridged import (
    drive,
    filled,
    instances,
    printed_command,
    started,
    warmup_seconds,
)
from tests.upstream.support import STUBS, Checkout, checkout, record_row

REPO = "cofe-ai/flm-audio"
SEAM = STUBS / "flm_audio"  # sitecustomize.py (Mimi shrunk) and build.py (the checkpoint)
ENV = {"TORCH_COMPILE_DISABLE": "1"}
# LMGen's delay (one step) + the frame the model must hear: its first audio is in frame 2
FIRST_AUDIO_S = 2 * 0.08


@pytest.fixture(scope="module")
def flm() -> Checkout:
    return checkout(REPO)


@pytest.fixture(scope="module")
def weights(flm, tmp_path_factory):
    out = tmp_path_factory.mktemp("flm-audio-tiny")
    subprocess.run([flm.python, str(SEAM / "build.py"), str(out), "--flm-repo", str(flm.path)],
                   check=True, capture_output=True, timeout=600,
                   env=dict(os.environ, PYTHONPATH=str(SEAM)))
    return out


def command(flm: Checkout, weights, *extra: str) -> list[str]:
    return filled(printed_command("flm_audio"), flm.python,
                  {"--port": "0", "--checkpoint": str(weights)},
                  ["--host", "127.0.0.1", "--flm-repo", str(flm.path), "--device", "cpu",
                   "--dtype", "float32", *extra])


def refusal(argv: list[str]) -> str:
    env = dict(os.environ, **ENV, PYTHONPATH=os.pathsep.join([str(SEAM), str(ROOT)]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert done.returncode != 0 and "listening on" not in done.stdout, done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stderr.strip().splitlines()[-1]


def test_the_heads_defects_refuse_to_start_in_one_line(flm, weights):
    """Against FLM-Audio's own code: each defect the bridge knows is found at start."""
    printed = command(flm, weights)
    assert "--workaround" in printed  # the printed command works around them
    bare = printed[:printed.index("--workaround")] + printed[printed.index("--workaround") + 2:]
    line = refusal(bare)
    assert "streaming_flmaudio.py:179" in line and "--workaround forward-audio" in line
    line = refusal(bare + ["--workaround", "forward-audio,pad-logits"])
    assert "streaming_flmaudio.py:24" in line and "--workaround initial-tokens" in line


def test_flm_audio_behind_the_printed_bridge_command(flm, weights, tmp_path):
    from pytest_duplexact.models import resolve_model

    with started(command(flm, weights, "--transcript"), [SEAM], what="the flm-audio bridge",
                 env=ENV) as served:
        assert warmup_seconds(served) >= 0  # it warmed up before it listened
        assert "working around FLM-Audio's own code: forward-audio, initial-tokens, " \
               "pad-logits" in served.log()

        def client():  # connects, READY checked
            return resolve_model("flm-audio", url=served.url)

        m = drive(served, client, instances(tmp_path), FIRST_AUDIO_S)
    record_row("flm-audio", flm, connects=True, **m.row(), barge_in_stop=None, sessions=1,
               notes="tiny random weights, --workaround all; barge-in cues played over its "
                     "speech, a random model's stop is not a decision to measure")
