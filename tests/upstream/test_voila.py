"""Voila-Autonomous: maitrix-org/Voila's own code (``model.py``'s ``VoilaAutonomousModel`` and
its ``run_generate``, ``voila_tokenizer.py``, ``tokenize_func.py``, ``spkr.py``) behind our
bridge (``bridges/voila.py``), started with the command docs/models.md prints, driven by the
plugin's bridge client over the network.

Stubbed (ours, ``tests/upstream/stubs/``): the weights (``voila_tiny.py``: a tiny checkpoint of
Voila's own classes whose set weights decide deterministically: it says "hello world" one
frame after the first user frame its codec hears as loud), the text tokenizer (one holding
Voila's special and audio tokens; the real one ships with the weights) and pyannote's speaker
network (``voila_site/pyannote``: a hub download). Attention runs as ``sdpa`` (the bridge's
fallback without flash-attn), on the CPU.

Environment (``$DUPLEXACT_UPSTREAM_DIR/maitrix-org+Voila.venv``), what this check ran on::

    python3.11 -m venv maitrix-org+Voila.venv
    maitrix-org+Voila.venv/bin/pip install torch==2.13.0 transformers==4.51.3 soundfile \\
        librosa numpy websockets einops
    maitrix-org+Voila.venv/bin/pip install --no-deps torchaudio==2.11.1
    rm maitrix-org+Voila.venv/lib/python3.11/site-packages/torchaudio/lib/*.so

(einops: ``audio_transformer.py`` imports it, Voila's requirements do not list it. No
torchaudio is built for torch 2.13; 2.11.1's compiled extension does not load against it, and
torchaudio runs without it (its ``_load_lib`` skips a missing library): Voila uses only the
pure-PyTorch ``torchaudio.functional.resample``. The authors' check used torch 2.9.1 with
torchaudio 2.9.1, a multi-GB download.)
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.bridges.model_support import bridge_process, client_trial
from tests.upstream.bridged import log_when
from tests.upstream.support import STUBS, checkout, record_row
from tests.upstream.tone_bridged import docs_command, fill, run_author_python, tone_instance

REPO = "maitrix-org/Voila"
START, END, AFTER = 1.0, 2.0, 0.5  # the user's tone (s); then silence and 1 s of observation
FRAME_S = 0.04


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    ck = checkout(REPO)
    tmp = tmp_path_factory.mktemp("voila")
    inst = tone_instance(tmp, START, END, AFTER)
    # what the bridge will hear: the clip, then DirectReplay's silence (observation)
    np.save(tmp / "user.npy", np.concatenate([inst.clips["user"].load(),
                                              np.zeros(16_000, np.float32)]))
    meta = json.loads(run_author_python(ck, STUBS / "voila_tiny.py", str(tmp / "weights"),
                                        "--signal", str(tmp / "user.npy")))
    return ck, tmp, inst, meta


def test_voila_behind_our_bridge(voila):
    ck, tmp, inst, meta = voila
    module, args = docs_command("voila")
    args = fill(args, {"VOILA": str(ck.path), "DIR": str(tmp / "weights" / "checkpoint"),
                       "TOKDIR": str(tmp / "weights" / "tokenizer")})
    with bridge_process(module, *args, "--device", "cpu", "--transcript", timeout=600,
                        python=ck.python, path=[STUBS / "voila_site"]) as proc:
        recs = [client_trial(proc.url, inst, model="voila") for _ in range(2)]
        log = log_when(proc, "ok, 88 steps", 2)  # each trial's line, after its socket closed
    assert "attention: sdpa" in log  # no flash-attn here: the fallback, where infer.py fails
    # the network decides after pulling frame k (its first loud one); run_generate puts the
    # text rows after that frame's audio row, so the words come with step k + 1
    expected = (meta["decision_frame"] + 1) * FRAME_S
    errors = []
    for rec in recs:  # one connection = one trial: the second starts afresh
        assert [w.text for w in rec.transcript] == meta["words"]
        errors.append(abs(rec.transcript[0].start - expected) * 1000)
        out = rec.output
        assert np.isfinite(out).all() and np.sqrt(np.mean(out ** 2)) > 0.01  # decoded speech
    assert log.count("ok, 88 steps") == 2, log[-2000:]  # each trial ended as the client did
    # the raw audio id after "world" is no frame's audio row (position, not id range)
    assert log.count("1 text rows with a raw audio id dropped") == 2
    record_row("voila", ck, connects=True, audio=True, text=True, barge_in_stop=None,
               onset_err_ms_median=float(np.median(errors)), onset_err_ms_max=max(errors),
               sessions=1, notes=f"tiny weights on CPU, sdpa; words at step "
                                 f"{meta['decision_frame'] + 1} as decided")
    assert max(errors) < 1.0
