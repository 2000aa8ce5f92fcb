"""The FLM-Audio bridge (bridges/flm_audio.py) against a fake of FLM-Audio's API
(model_stubs/flm.py): the real kit server, a real WebSocket client, and the bridge's own
command line in a subprocess."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from pytest_duplexact.bridges import flm_audio
from pytest_duplexact.bridges.modelkit import ModelMissing
from tests.bridges.model_stubs import SCALE, flm
from tests.bridges.model_stubs.tokenizer import FakeTokenizer, write_vocab
from tests.bridges.model_support import (
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


def bridge(tmp_path) -> flm_audio.FlmAudioBridge:
    folder = checkpoint(tmp_path)
    lm = flm.FLMAudioForCausalLM(folder)
    lm_gen = flm.LMGen(lm)
    defaults = {"seed": 0, **{k: getattr(lm_gen, k) for k in flm_audio.SAMPLING}}
    return flm_audio.FlmAudioBridge(torch, flm.get_mimi(str(folder)), lm_gen,
                                    FakeTokenizer(folder), device=torch.device("cpu"),
                                    text_wait_token_id=WAIT, defaults=defaults,
                                    transcript=True)


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
        check_trial(run_steps(server.url, frames, "temp_text=0.5&top_k_audio=3"))
        # the next trial starts afresh, with the default settings back
        check_trial(run_steps(server.url, frames))
        bad = run_steps(server.url, frames, "temperature=1")
    assert model.lm_gen.seen_settings[-2:] == [(0.5, 3), (0.01, 1)]
    assert model.mimi.resets == 2 and model.lm_gen.resets == 2
    assert "unknown option(s) temperature" in bad.error and "temp_text" in bad.error


def test_command_line_serves_the_plugin_client(tmp_path):
    folder = checkpoint(tmp_path / "ckpt")
    with bridge_process("flm_audio", "--checkpoint", str(folder), "--device", "cpu",
                        "--transcript", "--option", "temp_text=0.25") as proc:
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
                              device="cpu", dtype="float32", no_warmup=True, option=[])
    with pytest.raises(SystemExit, match="lacks tokenizer-e351c8d8"):
        (tmp_path / "config.json").write_text("{}")
        flm_audio.build(args)
    (tmp_path / flm.MIMI_NAME).write_bytes(b"")
    with pytest.raises(ModelMissing, match="cannot import 'flmaudio.models'.*cofe-ai/flm-audio"):
        flm_audio.build(args)
    args.checkpoint = "CofeAI/FLM-Audio"
    with pytest.raises(SystemExit, match="not a local directory.*hf download CofeAI/FLM-Audio"):
        flm_audio.build(args)
