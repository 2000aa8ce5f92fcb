"""The BayLing-Duplex bridge (bridges/bayling_duplex.py) against a fake of BayLing-Duplex's API
(model_stubs/bayling.py): the real kit server, a real WebSocket client, the bridge's command
line in a subprocess; and its input tokenization below the wire."""

from __future__ import annotations

import argparse
import json
import logging

import numpy as np
import pytest
import torch

from pytest_duplexact.bridges import bayling_duplex
from pytest_duplexact.bridges.bayling_duplex import BlockTokens
from pytest_duplexact.bridges.modelkit import ModelMissing
from pytest_duplexact.cli.model_listing import render
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.model_options import ModelConfigError
from tests.bridges.model_stubs import SCALE, bayling
from tests.bridges.model_stubs.tokenizer import write_vocab
from tests.bridges.model_support import (
    assert_echo,
    bridge_process,
    client_trial,
    constant_frames,
    dc_instance,
    run_steps,
)
from tests.bridges.support import served

FRAME = 1764  # one speech token (80 ms) at 22,050 Hz
PIECES = {1: "[PAD]", 2: "<|endoftext|>", 4: "<|assistant|>", 5: "[EPAD]", 6: "[SILENCE]",
          20: "▁Hi", 21: "▁there", 22: "▁aga", 23: "in", 24: "▁stray"}
# text tokens in order, 5 per 800 ms block: two replies, each closed by [EPAD]; the second's
# word spans two blocks
SCRIPT = [6, 4, 20, 21, 5, 6, 6, 6, 4, 22, 23, 5]
VALUES = [(100 + k) / SCALE for k in range(40)]  # four blocks
LAG = 10 + 5  # a block's speech plays from the next block on, after the decoder's lookahead


def folders(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"script": SCRIPT}))
    write_vocab(model, PIECES)
    tok = tmp_path / "speech_tokenizer"
    tok.mkdir()
    for name in ("config.json", "preprocessor_config.json"):
        (tok / name).write_text("{}")
    dec = tmp_path / "speech_decoder"
    dec.mkdir()
    for name in ("config.yaml", "flow.pt", "hift.pt"):
        (dec / name).write_text("")
    return model, tok, dec


def bridge(tmp_path) -> bayling_duplex.BayLingBridge:
    model, tok, dec = folders(tmp_path)
    return bayling_duplex.BayLingBridge(torch, bayling.BayLingDuplex(model, tok, dec),
                                        dict(bayling_duplex.DEFAULTS))


def check_trial(got, heard_tokens=len(VALUES) - LAG):
    assert (got.ready.sample_rate, got.ready.frame, got.ready.model) == \
        (22_050, FRAME, "bayling-duplex")
    heard = np.array([float(a[0]) for a in got.audio])
    # the fake echoes its user tokens as its speech: token t is heard in step t + LAG
    assert np.all(heard[:LAG] == 0)
    np.testing.assert_allclose(heard[LAG:LAG + heard_tokens], VALUES[:heard_tokens], atol=1e-6)
    assert np.all(heard[LAG + heard_tokens:] == 0)


TEXTS = [(19, " Hi"), (21, " there"), (33, " aga"), (34, "in")]


def test_blocks_replies_and_text_times(tmp_path):
    model = bridge(tmp_path)
    frames = constant_frames(VALUES, FRAME)
    with served(model) as server:
        model.model.tokenize_calls.clear()  # a warm-up's, if the kit ran one
        model.model.decoder.calls.clear()
        got = run_steps(server.url, frames)
        check_trial(got)
        # text token t is heard at x + t * x / y tokens (duplex.py's times) plus the decoder's
        # lookahead: step 15 + 2 t; the rest of a word in the next step (its own: 35)
        assert got.texts == TEXTS
        assert model.model.tokenize_calls == [10, 20, 30, 40]  # the 30 s window, re-read
        # each block after the previous one's 5 held-back tokens, never finalized ...
        assert model.model.decoder.calls == [(10, False), (15, False), (15, False), (15, False)]
        assert model.model.decoder.mel_overlap_dict == {}  # ... so the caches are dropped

        # BayLing's own default, max_epad_count=1, ends decoding at the first [EPAD]: the
        # held-back tail is flushed with a final call
        once = run_steps(server.url, frames, "max_epad_count=1&tokenize=block")
        check_trial(once, heard_tokens=10)
        assert once.texts == TEXTS[:2]
        assert model.model.tokenize_calls[4:] == [10]  # the block alone; then stopped
        assert model.model.decoder.calls[4:] == [(10, False), (5, True)]

        bad = run_steps(server.url, frames, "tokenize=whole")
    assert "option tokenize: one of window, block, got 'whole'" in bad.error


def test_text_only_inside_a_reply_and_no_underruns_after_the_end(tmp_path, caplog):
    model = bridge(tmp_path)
    # a word sampled outside a reply (where SCRIPT has [SILENCE]): no segment holds it
    model.model.script = [24, 4, 20, 21, 5, 24, 6, 24, 4, 22, 23, 5]
    frames = constant_frames(VALUES, FRAME)
    with caplog.at_level(logging.INFO, logger=bayling_duplex.log.name), served(model) as server:
        assert run_steps(server.url, frames).texts == TEXTS
        # the model stops at its first [EPAD]: what follows its last speech is silence, not
        # 25 decoder underruns
        check_trial(run_steps(server.url, frames, "max_epad_count=1&trial_id=s1"),
                    heard_tokens=10)
    assert "trial s1: 1 blocks, model stopped, 0 audio underruns" in caplog.text


def test_warmup_runs_one_block_and_ends_it(tmp_path):
    model = bridge(tmp_path)
    model.warmup()
    assert model.model.tokenize_calls == [10] and model.model.decoder.calls == [(10, False)]
    assert model.model.decoder.mel_overlap_dict == {}  # closed: its caches dropped


def test_decoder_on_the_cpu_runs_in_inference_mode(tmp_path):
    model, tok, dec = folders(tmp_path)
    fake = bayling.BayLingDuplex(model, tok, dec, device="cpu")
    frames = constant_frames(VALUES, FRAME)
    with served(bayling_duplex.BayLingBridge(torch, fake, dict(bayling_duplex.DEFAULTS),
                                             decoder_inference_mode="on")) as server:
        check_trial(run_steps(server.url, frames))  # "auto" is the command line's test
    with pytest.raises(SystemExit, match=r"^bayling-duplex bridge: BayLing's decoder fails on "
                                         r"the CPU outside inference mode \(bayling_duplex_"
                                         r"runtime/flow_inference\.py:14, .*--decoder-"
                                         r"inference-mode auto or on$"):
        bayling_duplex.BayLingBridge(torch, fake, {}, decoder_inference_mode="off")


def test_window_tokens_straddle_a_window_edge():
    calls = []

    def tokenize(samples):  # a token per 2 samples: the first sample of each pair
        calls.append(samples.size)
        return [int(v) for v in samples[::2]]

    tokens = BlockTokens(tokenize, samples_per_token=2, window_tokens=3)
    tokens.add(np.arange(8, dtype=np.float32))
    assert tokens.take(2) == [0, 2]
    assert tokens.take(2) == [4, 6]  # token 2 from window 0 (6 samples), token 3 from window 1
    assert calls == [4, 6, 2]
    with pytest.raises(ValueError, match="need 12 samples; have 8"):
        tokens.take(2)


def test_command_line_serves_the_plugin_client(tmp_path):
    model, tok, dec = folders(tmp_path)
    with bridge_process("bayling_duplex", "--model-path", str(model), "--speech-tokenizer-path",
                        str(tok), "--decoder-path", str(dec), "--device", "cpu",
                        "--option", "tokenize=block") as proc:
        got = run_steps(proc.url, constant_frames(VALUES, FRAME), "trial_id=b1")
        check_trial(got)
        assert got.texts == TEXTS
        assert "trial b1: 4 blocks, model running, 0 audio underruns" in proc.log()
        # the plugin's client and pipeline, by the model's name: the native words on the
        # recording's clock, one word from the pieces of two blocks
        rec = client_trial(proc.url, dc_instance(tmp_path), model="bayling-duplex")
        with pytest.raises(ModelConfigError, match="flm-audio: the bridge at ws://127.0.0.1:"
                                                   "[0-9]+ serves 'bayling-duplex', not "
                                                   "'flm-audio'; start python -m "
                                                   "pytest_duplexact.bridges.flm_audio"):
            resolve_model("flm-audio", url=proc.url)
        # duplexact models NAME -o url=...: whether that model answers there now
        listed, ready = render(["bayling-duplex"], {"url": proc.url})
        assert ready and "reachable: bayling-duplex: stepped, 22050 Hz, 1764-sample frames, " \
                         "transcript yes" in listed
        listed, ready = render(["flm-audio"], {"url": proc.url})
        assert not ready and "serves 'bayling-duplex', not 'flm-audio'" in listed
    assert [(w.text, round(w.start, 3), round(w.end, 3)) for w in rec.transcript] == \
        [("Hi", 1.52, 1.6), ("there", 1.68, 1.76), ("again", 2.64, 2.8)]
    assert_echo(rec, 0.08, delay=LAG)


def test_missing_package_and_files_are_clear(tmp_path):
    model, tok, dec = folders(tmp_path)
    args = argparse.Namespace(model_path=str(model), speech_tokenizer_path=str(tok),
                              decoder_path=str(tmp_path), interleave_ratio="10:5:10",
                              device="cpu", torch_dtype="auto", bayling_repo=None, option=[],
                              decoder_inference_mode="auto")
    with pytest.raises(SystemExit, match="--decoder-path .* lacks config.yaml, flow.pt, hift.pt"):
        bayling_duplex.build(args)
    args.decoder_path = str(dec)
    with pytest.raises(SystemExit, match="--option: option max_epad_count must be >= 1"):
        bayling_duplex.build(argparse.Namespace(**{**vars(args), "option": ["max_epad_count=0"]}))
    with pytest.raises(ModelMissing, match="cannot import 'bayling_duplex.duplex'"):
        bayling_duplex.build(args)
