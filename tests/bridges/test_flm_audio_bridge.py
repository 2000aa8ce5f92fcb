"""The FLM-Audio bridge (bridges/flm_audio.py) against a fake of FLM-Audio's API
(model_stubs/flm.py): the real kit server, a real WebSocket client, and the bridge's own
command line in a subprocess."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from pytest_duplexact.bridges import Trial, flm_audio
from pytest_duplexact.bridges.modelkit import ModelMissing
from tests.bridges.model_stubs import SCALE, SITE, flm
from tests.bridges.model_stubs.tokenizer import FakeTokenizer, write_vocab
from tests.bridges.model_support import (
    ROOT,
    assert_echo,
    bridge_process,
    client_trial,
    constant_frames,
    dc_instance,
    run_steps,
)
from tests.bridges.support import served

WAIT = 5
PIECES = {10: "▁Hel", 11: "lo", 12: "▁wor", 13: "ld"}
# LMGen's text token per step (step 0 is inside its delay): 3 and 0 are never text, WAIT ends
# a segment
SCRIPT = [99, 3, 10, 11, WAIT, 0, 12, 13, WAIT]


def checkpoint(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({"script": SCRIPT, "wait_id": WAIT}))
    (tmp_path / flm.MIMI_NAME).write_bytes(b"")
    write_vocab(tmp_path, PIECES)
    return tmp_path


def bridge(tmp_path, workarounds=tuple(flm_audio.WORKAROUNDS)) -> flm_audio.FlmAudioBridge:
    """The bridge on the fakes, as ``build`` makes it with ``--workaround`` ``workarounds``
    (all of them by default: the fakes have FLM-Audio's defects)."""
    folder = checkpoint(tmp_path)
    lm = flm.FLMAudioForCausalLM(folder)
    mimi = flm.get_mimi(str(folder))
    flm_audio.prepare_lm(lm, mimi, set(workarounds))
    lm_gen = flm.LMGen(lm)
    defaults = {"seed": 0, **{k: getattr(lm_gen, k) for k in flm_audio.SAMPLING}}
    return flm_audio.FlmAudioBridge(torch, mimi, lm_gen, FakeTokenizer(folder),
                                    device=torch.device("cpu"), text_wait_token_id=WAIT,
                                    defaults=defaults, transcript=True,
                                    workarounds=workarounds)


VALUES = [(20 + k) / SCALE for k in range(10)]


def check_trial(got):
    assert (got.ready.mode, got.ready.sample_rate, got.ready.frame, got.ready.transcript,
            got.ready.model) == ("stepped", 24_000, 1_920, True, "flm-audio")
    # LMGen's one-step delay, then the answer to frame k is heard in step k + 1
    heard = [float(a[0]) for a in got.audio]
    assert heard[:2] == [0.0, 0.0]
    np.testing.assert_allclose(heard[2:], VALUES[:-2], atol=1e-6)
    assert all(np.all(a == a[0]) for a in got.audio)
    # LMGen step s's text is heard with its audio, in step s + 1
    assert got.texts == [(3, " Hel"), (4, "lo"), (7, " wor"), (8, "ld")]


def test_frames_and_text_on_the_bridge_clock(tmp_path):
    model = bridge(tmp_path)
    with served(model) as server:
        frames = constant_frames(VALUES, 1920)
        check_trial(run_steps(server.url, frames,
                              "temp_text=0.5&top_p_audio=0&top_k_audio=3"))
        # the next trial starts afresh, with the default settings back
        check_trial(run_steps(server.url, frames))
        bad = run_steps(server.url, frames, "temperature=1")
    assert model.lm_gen.seen_settings[-2:] == [(0.5, 3), (0.01, 1)]
    assert model.mimi.resets == 2 and model.lm_gen.resets == 2
    assert "unknown option(s) temperature" in bad.error and "temp_text" in bad.error


def test_command_line_serves_the_plugin_client(tmp_path):
    folder = checkpoint(tmp_path / "ckpt")
    with bridge_process("flm_audio", "--checkpoint", str(folder), "--device", "cpu",
                        "--transcript", "--option", "temp_text=0.25",
                        "--workaround", "all") as proc:
        check_trial(run_steps(proc.url, constant_frames(VALUES, 1920), "trial_id=t7"))
        bad = run_steps(proc.url, [], "top_p_text=x")
        assert "option top_p_text: expected float, got 'x'" in bad.error
        assert "trial t7 from 127.0.0.1" in proc.log()
        # the plugin's client and pipeline: the words on the recording's clock
        rec = client_trial(proc.url, dc_instance(tmp_path))
    assert [(w.text, round(w.start, 3), round(w.end, 3)) for w in rec.transcript] == \
        [("Hello", 0.24, 0.4), ("world", 0.56, 0.72)]
    assert_echo(rec, 0.08, delay=2)  # LMGen's delay + the answer heard a frame later


def test_missing_package_and_files_are_clear(tmp_path):
    args = argparse.Namespace(checkpoint=str(tmp_path), mimi=None, flm_repo=None,
                              device="cpu", dtype="float32", option=[], workaround=[])
    with pytest.raises(SystemExit, match="lacks tokenizer-e351c8d8"):
        (tmp_path / "config.json").write_text("{}")
        flm_audio.build(args)
    (tmp_path / flm.MIMI_NAME).write_bytes(b"")
    with pytest.raises(ModelMissing, match="cannot import 'flmaudio.models'.*cofe-ai/flm-audio"):
        flm_audio.build(args)
    args.checkpoint = "CofeAI/FLM-Audio"
    with pytest.raises(SystemExit, match="not a local directory.*hf download CofeAI/FLM-Audio"):
        flm_audio.build(args)


# --- FLM-Audio's own defects (cofe-ai/flm-audio@41d768c; the fakes have them too) -------------

def test_the_fakes_have_flm_audios_defects(tmp_path):
    folder = checkpoint(tmp_path)
    lm = flm.FLMAudioForCausalLM(folder)
    lm_gen = flm.LMGen(lm)
    lm_gen.streaming_forever(1)
    code = torch.zeros(1, 8, 1, dtype=torch.long)
    with pytest.raises(TypeError, match="step"):  # depformer_step vs forward_audio
        lm_gen.step(code)
    flm_audio.prepare_lm(lm, flm.get_mimi(str(folder)), {"forward-audio"})
    lm_gen.reset_streaming()
    lm_gen.step(code)
    initial = lm._get_initial_token()[0, :, 0].tolist()
    assert lm_gen.first_inputs == [initial, [0] * 17] and initial[:2] == [WAIT, flm.PAD]
    with pytest.raises(IndexError):  # Mimi's codebooks end at 2047
        flm.get_mimi(str(folder)).decode(torch.full((1, 8, 1), flm.PAD))


def test_initial_tokens_are_written_back_at_every_reset(tmp_path):
    for workarounds, second in ((tuple(flm_audio.WORKAROUNDS), "initial"),
                                (("forward-audio", "pad-logits"), "zeros")):
        model = bridge(tmp_path / second, workarounds=workarounds)
        assert model.reset_loses_initial_tokens()  # the defect, found at start
        initial = model.lm_gen.lm_model._get_initial_token()[0, :, 0].tolist()
        model.lm_gen.first_inputs.clear()
        for _ in range(2):
            model.open({}, Trial()).step(np.zeros(1920, np.float32))
        assert model.lm_gen.first_inputs == [initial, initial] if second == "initial" else \
            [[0] * 17] * 2


PAD_AT = (flm.PAD_TRIGGER + 0.2) / SCALE  # a frame whose code is the fake's pad trigger


def test_the_pad_guard_and_its_workaround(tmp_path):
    frames = constant_frames([0.03, PAD_AT, 0.04, 0.05], 1920)
    with served(bridge(tmp_path)) as server:  # pad-logits: the depth heads cannot pick it
        got = run_steps(server.url, frames)
    assert not got.error
    np.testing.assert_allclose([a[0] for a in got.audio], [0, 0, 0.03, flm.PAD_TRIGGER / SCALE])
    unpatched = bridge(tmp_path / "b", workarounds=("forward-audio", "initial-tokens"))
    with served(unpatched) as server:
        got = run_steps(server.url, frames)
    # LMGen emits the pad in step 2 (its delay), the bridge's guard stops it before Mimi
    assert len(got.audio) == 2 and "failed in step 2" in got.error
    assert "audio id 2048, which Mimi cannot decode (its codes are 0-2047;" in got.error
    assert got.error.endswith("start the bridge with --workaround pad-logits")
    assert "IndexError" not in got.error


def test_top_k_without_effect_is_refused(tmp_path):
    with served(bridge(tmp_path)) as server:
        for kind in ("audio", "text"):
            bad = run_steps(server.url, [], f"top_k_{kind}=5")
            assert f"top_k_{kind} has no effect while top_p_{kind} > 0" in bad.error
            assert "sampling.py:118" in bad.error and f"set top_p_{kind}=0" in bad.error
            assert not run_steps(server.url, [], f"top_k_{kind}=5&top_p_{kind}=0").error


def start_refused(folder, *args: str) -> str:
    """The bridge's command line on the fakes, expected to refuse: its one-line message."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT)]))
    done = subprocess.run([sys.executable, "-m", "pytest_duplexact.bridges.flm_audio",
                           "--port", "0", "--checkpoint", str(folder), "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "listening on" not in done.stdout
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_each_defect_without_its_workaround_refuses_to_start_in_one_line(tmp_path):
    folder = checkpoint(tmp_path)
    line = start_refused(folder)
    assert line.startswith("flm-audio bridge: LMGen.depformer_step calls forward_audio")
    assert "streaming_flmaudio.py:179" in line and "modeling_flmaudio.py:944" in line
    assert "Start with --workaround forward-audio (or --workaround all)" in line
    line = start_refused(folder, "--workaround", "forward-audio,pad-logits")
    assert "_LMGenState.reset" in line and "streaming_flmaudio.py:24" in line
    assert "--workaround initial-tokens" in line
    line = start_refused(folder, "--workaround", "all", "--option", "top_k_text=5")
    assert "--option: top_k_text has no effect while top_p_text > 0" in line
    assert "expected one of forward-audio" in start_refused(folder, "--workaround", "pad")
