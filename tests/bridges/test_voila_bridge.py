"""The Voila bridge (bridges/voila.py) against a fake of Voila's API (model_stubs/voila.py):
``run_generate`` in its thread fed one frame per step, through the real kit server, a real
WebSocket client and the bridge's command line in a subprocess."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pytest_duplexact.bridges import voila as voila_bridge
from pytest_duplexact.bridges.modelkit import ModelMissing
from tests.bridges.model_stubs import SCALE, VOILA_CHECKOUT, voila
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

NC, CB, AUDIO_MIN = 2, 256, 1000
FRAME = 640
PIECES = {1: "<pad>", 2: "</s>", 3: "<au_token>", 4: "<|VOILA|>", 5: "<|HUMAN|>",
          31: "▁Hi", 32: "▁Hey", 33: "▁you",
          **{AUDIO_MIN + i: f"<|{i}|>" for i in range(NC * CB)}}
# run_generate's rows: text ids, "A" an audio row (one user frame pulled)
SCRIPT = [31, "A", "A", 4, 32, "A", 33, 2, "A"]
VALUES = [(20 + k) / SCALE for k in range(8)]


def folders(tmp_path):
    ckpt, tok = tmp_path / "ckpt", tmp_path / "tokenizer"
    for folder in (ckpt, tok):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(
            {"num_codebooks": NC, "codebook_size": CB, "script": SCRIPT}))
    write_vocab(ckpt, PIECES, eos=2, pad=1)
    return ckpt, tok


def bridge(tmp_path) -> voila_bridge.VoilaBridge:
    ckpt, tok = folders(tmp_path)
    return voila_bridge.assemble(torch, voila, voila.VoilaAutonomousModel(ckpt),
                                 FakeTokenizer(ckpt), voila.VoilaTokenizer(tok),
                                 device=torch.device("cpu"), ref_embs=torch.zeros(256),
                                 defaults=dict(voila_bridge.DEFAULTS), step_timeout=30,
                                 transcript=True)


def check_trial(got, texts=((0, " Hi"), (2, " Hey"), (3, " you"))):
    assert (got.ready.sample_rate, got.ready.frame, got.ready.model, got.ready.transcript) == \
        (16_000, FRAME, "voila", bool(texts))
    heard = [float(a[0]) for a in got.audio]
    # audio row k is generated before user frame k is pulled: the fake echoes frame k - 1
    assert heard[0] == 0.0
    np.testing.assert_allclose(heard[1:], VALUES[:-1], atol=1e-6)
    # text rows before audio row k are sent with step k
    assert got.texts == list(texts)


def test_rows_to_steps_and_text(tmp_path):
    model = bridge(tmp_path)
    with served(model) as server:
        model.model.calls.clear()  # a warm-up's, if the kit ran one
        check_trial(run_steps(server.url, constant_frames(VALUES, FRAME),
                              "instruction=▁Hi&temperature=0.5"))
        assert not [t for t in threading.enumerate() if t.name == "voila-run-generate"]
        short = run_steps(server.url, constant_frames(VALUES, FRAME), "max_new_tokens=5")
        # the run ends in its first row, before it asks for any input: the trial never opens
        none = run_steps(server.url, constant_frames(VALUES, FRAME), "max_new_tokens=1")
    assert "cannot start the trial: GenerationEnded: run_generate ended after 1 rows" in \
        none.error
    call = model.model.calls[0]
    assert call["prompt"] == [31, 5] and call["temperature"] == 0.5 and call["ref_embs"]
    assert model.model.calls[1]["max_new_tokens"] == 5
    assert "run_generate ended after 5 rows (raise the max_new_tokens option" in short.error
    assert len(short.audio) == 1  # the trial ended with the model's run, as an ERROR


def test_audio_row_by_position_not_by_id(tmp_path):
    """The text head may sample a raw audio id: run_generate pulls no frame for that row
    (model.py 1356-1372), so it is neither the frame's audio nor a word."""
    model = bridge(tmp_path)
    stray = AUDIO_MIN + 7  # <|7|>: an audio id in a text row
    model.model.script = [31, "A", stray, "A", 4, 32, "A", 33, 2, stray, "A"]
    with served(model) as server:
        got = run_steps(server.url, constant_frames(VALUES, FRAME))
    assert not got.error
    check_trial(got)


def test_warmup_runs_a_short_trial_and_ends_it(tmp_path):
    model = bridge(tmp_path)
    model.warmup()
    assert len(model.model.calls) == 1 and model.model.calls[0]["max_new_tokens"] == 8192
    assert not [t for t in threading.enumerate() if t.name == "voila-run-generate"]


def test_attention_falls_back_to_sdpa_without_flash_attn(tmp_path, monkeypatch):
    real = voila_bridge.importlib.util.find_spec

    def without_flash(name, *a):
        return None if name == "flash_attn" else real(name, *a)

    monkeypatch.setattr(voila_bridge.importlib.util, "find_spec", without_flash)
    assert voila_bridge.attention_for("auto", "cuda") == "sdpa"
    assert voila_bridge.attention_for("auto", "cpu") == "sdpa"
    assert voila_bridge.attention_for("eager", "cuda") == "eager"
    with pytest.raises(SystemExit, match="--attention flash_attention_2 needs the flash-attn "
                                         "package .*; --attention sdpa runs without it"):
        voila_bridge.attention_for("flash_attention_2", "cuda")
    monkeypatch.setattr(voila_bridge.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "flash_attn" else real(name, *a))
    assert voila_bridge.attention_for("auto", "cuda") == "flash_attention_2"  # infer.py's
    assert voila_bridge.attention_for("auto", "cpu") == "sdpa"


def test_transformers_without_seen_tokens_is_refused():
    class Old:  # transformers 4.51.3
        seen_tokens = 0

    voila_bridge.check_transformers("4.51.3", SimpleNamespace(DynamicCache=Old))
    with pytest.raises(SystemExit, match=r"^voila bridge: transformers 4\.57\.1 has no "
                                         r"DynamicCache\.seen_tokens, which Voila's model\.py "
                                         r"reads \(line 1157.*pip install transformers==4\.51\.3$"):
        voila_bridge.check_transformers("4.57.1", SimpleNamespace(DynamicCache=object))


def test_command_line_serves_the_plugin_client(tmp_path):
    ckpt, tok = folders(tmp_path)
    with bridge_process("voila", "--voila-repo", str(VOILA_CHECKOUT), "--checkpoint", str(ckpt),
                        "--audio-tokenizer", str(tok), "--device", "cpu", "--transcript",
                        "--option", "context=3") as proc:
        check_trial(run_steps(proc.url, constant_frames(VALUES, FRAME)))
        # no flash-attn here: the LM loads with sdpa, where infer.py would fail
        assert "attention: sdpa" in proc.log()
        # the plugin's client and pipeline: words on the recording's clock
        rec = client_trial(proc.url, dc_instance(tmp_path))
    assert [(w.text, round(w.start, 3), round(w.end, 3)) for w in rec.transcript] == \
        [("Hi", 0.0, 0.04), ("Hey", 0.08, 0.12), ("you", 0.12, 0.16)]
    assert_echo(rec, 0.04, delay=1)  # audio row k answers user frames before k


def test_without_transcript_only_audio(tmp_path):
    model = bridge(tmp_path)
    model.transcript = False  # the default: the paper transcribed Voila's speech
    with served(model) as server:
        check_trial(run_steps(server.url, constant_frames(VALUES, FRAME)), texts=())


def test_missing_checkout_and_package_are_clear(tmp_path, monkeypatch):
    ckpt, tok = folders(tmp_path)
    args = argparse.Namespace(voila_repo=str(tmp_path), checkpoint=str(ckpt),
                              audio_tokenizer=str(tok), ref_audio=None,
                              speaker_model=voila_bridge.SPEAKER_MODEL, device="cpu",
                              step_timeout=30.0, option=[])
    with pytest.raises(SystemExit, match="--voila-repo .* lacks model.py, voila_tokenizer.py"):
        voila_bridge.build(args)
    args.voila_repo = str(VOILA_CHECKOUT)
    with pytest.raises(SystemExit, match="--option: option context must be >= 0"):
        voila_bridge.build(argparse.Namespace(**{**vars(args), "option": ["context=-1"]}))
    monkeypatch.setitem(sys.modules, "torchaudio", None)  # not installed, as here
    with pytest.raises(ModelMissing, match="cannot import 'torchaudio'.*maitrix-org/Voila"):
        voila_bridge.build(args)
