"""BayLing-Duplex: BayLing-Models/BayLing-Duplex's own code (``bayling_duplex/duplex.py``'s
``BayLingDuplex``: ``stream_audio_tokens``, ``tokenize_audio``, ``stream_tokens_to_audio``;
``bayling_duplex_runtime``'s ``WhisperVQEncoder``, ``AudioDecoder``, flow and HiFT) behind our
bridge (``bridges/bayling_duplex.py``), started with the command docs/models.md prints,
driven by the plugin's bridge client over the network.

Stubbed (ours, ``tests/upstream/stubs/bayling_tiny.py``): the weights, tiny, set so that the
model decides deterministically (a block whose last user speech token is the tone's code
starts a reply, "hello world" then ``[EPAD]``, then a word outside any reply); the LM and its tokenizer, which ship with the
real weights as ChatGLM remote code: a tiny Llama loaded the same way stands in; the decoder's
``config.yaml``. On the CPU, so the bridge's decoder runs under ``torch.inference_mode``
(``--decoder-inference-mode auto``: the authors' ``fade_in_out`` fails without it, which this
module also checks). The checkout goes on the bridge's ``PYTHONPATH`` in place of README's
``pip install -e .`` (which would write into the shared checkout).

Environment (``$DUPLEXACT_UPSTREAM_DIR/BayLing-Models+BayLing-Duplex.venv``)::

    python3.11 -m venv BayLing-Models+BayLing-Duplex.venv
    BayLing-Models+BayLing-Duplex.venv/bin/pip install torch==2.13.0 transformers==4.51.3 \\
        safetensors sentencepiece numpy scipy einops omegaconf hyperpyyaml diffusers \\
        conformer soundfile websockets
    BayLing-Models+BayLing-Duplex.venv/bin/pip install --no-deps torchaudio==2.11.1
    rm BayLing-Models+BayLing-Duplex.venv/lib/python3.11/site-packages/torchaudio/lib/*.so

(soundfile: ``duplex.py`` imports it, its requirements do not list it. torchaudio as for Voila,
tests/upstream/test_voila.py: no build for torch 2.13, its extension removed; nothing here
calls it.)
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.bridges.model_support import bridge_process, client_trial
from tests.upstream.bridged import log_when
from tests.upstream.support import STUBS, checkout, record_row
from tests.upstream.tone_bridged import docs_command, run_author_python, tone_instance

REPO = "BayLing-Models/BayLing-Duplex"
START, END, AFTER = 1.0, 2.0, 0.5  # the user's tone (s); then silence and 1 s of observation
TOKEN_S, X, Y, OVERLAP = 0.08, 10, 5, 5  # 12.5 Hz; 10:5:10; the decoder's lookahead (tokens)


@pytest.fixture(scope="module")
def bayling(tmp_path_factory):
    ck = checkout(REPO)
    tmp = tmp_path_factory.mktemp("bayling")
    meta = json.loads(run_author_python(ck, STUBS / "bayling_tiny.py", str(tmp / "weights")))
    return ck, tmp, meta


def expected_starts(tmp) -> list[float]:
    """Where the words go: the first block whose last user token (80 ms) lies in the tone
    starts the reply, its text tokens t = 5 b .. (<|assistant|>, hello, world, [EPAD]) timed as
    duplex.py's _build_segment times them (x + t x / y tokens) plus the decoder's lookahead."""
    block = next(b for b in range(10) if START <= ((b + 1) * X - 1) * TOKEN_S < END)
    return [(X + OVERLAP + (Y * block + i) * X // Y) * TOKEN_S for i in (1, 2)]


def test_bayling_fade_in_out_fails_on_the_cpu_outside_inference_mode(bayling):
    """What --decoder-inference-mode works around: the authors' decoder on the CPU."""
    ck, tmp, _ = bayling
    got = json.loads(run_author_python(ck, STUBS / "bayling_tiny.py", str(tmp / "weights"),
                                       "--fade-on-cpu"))
    assert "Inplace update to inference tensor outside InferenceMode" in got["fade_error"]


def test_bayling_behind_our_bridge(bayling, monkeypatch):
    ck, tmp, meta = bayling
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp / "hf_modules"))  # the stand-in LM's code
    module, args = docs_command("bayling-duplex")
    w = tmp / "weights"
    args = [{"models/bayling_duplex_model": str(w / "model"),
             "models/speech_tokenizer": str(w / "speech_tokenizer"),
             "models/speech_decoder": str(w / "speech_decoder")}.get(a, a) for a in args]
    inst = tone_instance(tmp, START, END, AFTER)
    with bridge_process(module, *args, "--device", "cpu", timeout=600, python=ck.python,
                        path=[ck.path]) as proc:
        recs = [client_trial(proc.url, inst, model="bayling-duplex") for _ in range(2)]
        # BayLing's own default: decoding ends at the first [EPAD]
        once = client_trial(proc.url, inst, model="bayling-duplex", max_epad_count="1")
        # each trial's line, written after its socket closed
        log = log_when(proc, r"trial take_turn-immediate: \d+ blocks", 3)
    errors = []
    starts = expected_starts(tmp)
    for rec in recs + [once]:
        # the word said after [EPAD], outside any reply, is not sent
        assert [x.text for x in rec.transcript] == meta["words"]
        errors += [abs(x.start - s) * 1000 for x, s in zip(rec.transcript, starts)]
        out = rec.output
        speech_from = int((X + OVERLAP) * TOKEN_S * 16_000)  # the first block's, after lookahead
        assert np.isfinite(out).all() and np.abs(out[:speech_from - 800]).max() == 0
        assert np.sqrt(np.mean(out[speech_from:speech_from + 16_000] ** 2)) > 0.005
    runs = re.findall(r"trial take_turn-immediate: (\d+) blocks, model (\w+), (\d+) audio "
                      r"underruns", log)
    assert [(b, state) for b, state, _ in runs] == [("4", "running")] * 2 + [("2", "stopped")]
    gaps = [int(n) for _, _, n in runs]
    # a gap is at most one per decoder call; the silence after the model stopped is none
    assert gaps[2] <= 3, gaps
    record_row("bayling-duplex", ck, connects=True, audio=True, text=True, barge_in_stop=None,
               onset_err_ms_median=float(np.median(errors)), onset_err_ms_max=max(errors),
               sessions=1, notes=f"tiny weights on CPU, decoder in inference mode; decoder "
                                 f"gaps per trial {gaps}")
    assert max(errors) < 1.0
