"""The moshi adapter on a tiny random Moshi (tests/models/moshi_tiny.py) loaded through the real
checkpoint path: the frame clock, input dependence, seeded determinism, the text stream's word
times, and the preflight messages for a missing package or checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.models import preflight, resolve_model
from pytest_duplexact.models.catalogue import requirements
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.moshi import FRAME_S, TextStream, trial_seed

pytest.importorskip("moshi", reason="moshi is installed by .ci/run (pip install --no-deps)")
# moshi's modules use torch.jit.script_method, which torch 2.13 deprecates (harmless here)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from tests.models.providers.moshi_tiny import write_checkpoints

    return write_checkpoints(tmp_path_factory.mktemp("moshi-tiny"))


def model(checkpoints, **extra):
    return resolve_model("moshi", **checkpoints, device="cpu", threads="1", **extra)


def run_frames(m, x: np.ndarray, seed: int = 0):
    m.start(SessionInfo(instance=None, seed=seed))
    outs, words = [], []
    for k in range(len(x) // m.frame_size):
        out = m.step(x[k * m.frame_size:(k + 1) * m.frame_size])
        outs.append(out.audio)
        words += [Word(k * FRAME_S + w.start, k * FRAME_S + w.end, w.text)
                  for w in out.transcript]
    m.finish()
    return np.concatenate(outs), words


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(seconds * 24_000))).astype(np.float32)


def test_frame_clock_delay_and_seeded_determinism(checkpoints):
    m = model(checkpoints)
    assert (m.sample_rate, m.frame_size) == (24_000, 1_920)
    x = noise(2.0)
    a, words = run_frames(m, x)
    # frame 0: the LM's delay; frame 1: the answer to frame 0 is heard one frame later
    assert not a[:2 * 1920].any() and np.abs(a[2 * 1920:]).max() > 0
    b, again = run_frames(m, x)  # the same object, a new trial
    c, _ = run_frames(model(checkpoints), x)  # a fresh model, the same seeds
    assert np.array_equal(a, b) and np.array_equal(a, c) and words == again
    # (float: a start summed from frame steps may sit 1 ulp below the frame edge)
    assert words and all(w.start >= 2 * FRAME_S - 1e-9 and w.end > w.start for w in words)
    assert not np.array_equal(a, run_frames(model(checkpoints, seed="7"), x)[0])
    assert not np.array_equal(a, run_frames(m, x, seed=1)[0])  # the run seed counts too


def test_output_depends_on_the_input(checkpoints):
    m = model(checkpoints)
    a, _ = run_frames(m, noise(1.0, seed=0))
    b, _ = run_frames(m, noise(1.0, seed=1))
    assert not np.array_equal(a, b)


def test_own_rng_is_untouched_by_other_torch_work(checkpoints):
    import torch

    m = model(checkpoints)
    x = noise(1.0)
    a, _ = run_frames(m, x)
    m.start(SessionInfo(instance=None, seed=0))
    outs = []
    for k in range(len(x) // 1920):
        torch.rand(100)  # someone else draws from the global RNG between steps
        outs.append(m.step(x[k * 1920:(k + 1) * 1920]).audio)
    m.finish()
    assert np.array_equal(a, np.concatenate(outs))


# Through the stepped pipelines (direct, simulator and barge-in): output as long as input and
# audible, the native words from the LM's delay on and in order, is checked on the recordings
# of tests/plugin/test_moshi_run.py, which steps this tiny Moshi through all three anyway.


def test_text_stream_words_on_the_frame_clock():
    ts = TextStream(FRAME_S)
    fed = [ts.feed(k, p) for k, p in enumerate([None, "▁hel", "lo", "▁you", None, None, "re",
                                                "▁ok", None])]
    assert fed[:3] == [[], [], []]
    # "hello" (frames 1-2) completes when "▁you" starts at frame 3: start 2 frames back
    assert fed[3] == [Word(-2 * FRAME_S, 0.0, "hello")]
    assert fed[4] == [Word(-FRAME_S, 0.0, "you")]
    assert fed[7] == [Word(-FRAME_S, 0.0, "re")]  # a piece after padding opens a word
    assert fed[8] == [Word(-FRAME_S, 0.0, "ok")]
    assert ts.feed(9, "▁") == [] and ts.feed(10, None) == []  # a bare "▁" is no word


def test_trial_seed_mixes_both_seeds():
    assert trial_seed(0, 0) == trial_seed(0, 0)
    assert len({trial_seed(0, 1), trial_seed(1, 0), trial_seed(0, 0)}) == 3


def test_preflight_names_every_missing_checkpoint(checkpoints, tmp_path):
    preflight("moshi", **checkpoints)
    with pytest.raises(requirements.NotReady) as e:
        preflight("moshi", mimi_weights=str(tmp_path / "gone.safetensors"),
                  lm_weights="hf://kyutai/moshiko-pytorch-bf16/model.safetensors",
                  tokenizer=checkpoints["tokenizer"])
    msg = str(e.value)
    assert msg.startswith("model 'moshi' cannot run here: ")
    assert "mimi_weights" in msg and "gone.safetensors" in msg
    assert "lm_weights" in msg and "nothing is downloaded" in msg
    with pytest.raises(requirements.NotReady, match="hub repository id"):
        preflight("moshi", **dict(checkpoints, tokenizer="kyutai/moshiko-pytorch-bf16"))
    with pytest.raises(requirements.NotReady, match="option tokenizer .* is not set"):
        preflight("moshi", **dict(checkpoints, tokenizer=""))
    with pytest.raises(ModelConfigError, match="unknown option.*colour"):
        preflight("moshi", **checkpoints, colour="red")
    with pytest.raises(ModelConfigError, match="temp must be float"):
        preflight("moshi", **checkpoints, temp="warm")


def test_missing_package_fails_before_the_adapter_is_imported(monkeypatch, checkpoints):
    import sys

    real = requirements._importable
    monkeypatch.setattr(requirements, "_importable", lambda m: m != "moshi" and real(m))
    monkeypatch.delitem(sys.modules, "pytest_duplexact.models.providers.moshi")
    with pytest.raises(requirements.NotReady) as e:
        preflight("moshi", **checkpoints)
    assert "package 'moshi' is not installed (pip install --no-deps moshi==0.2.13" in str(e.value)
    with pytest.raises(requirements.NotReady):
        resolve_model("moshi", **checkpoints)
    assert "pytest_duplexact.models.providers.moshi" not in sys.modules


def test_wrong_tokenizer_is_refused(checkpoints, tmp_path):
    import sentencepiece as spm

    from tests.models.providers.moshi_tiny import SENTENCES

    path = tmp_path / "small.model"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES),
                                   model_prefix=str(path.with_suffix("")), vocab_size=30,
                                   minloglevel=2)
    with pytest.raises(ModelConfigError, match="tokenizer has 30 pieces but the LM emits 48"):
        model(dict(checkpoints, tokenizer=str(path)))


def test_the_install_step_keeps_our_torch():
    """.ci/run installs moshi without its dependencies (it pins torch<2.10); the hint that
    preflight prints is the same command."""
    from importlib.metadata import version
    from pathlib import Path

    ci = (Path(__file__).parents[3] / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install --quiet --no-deps moshi==0.2.13" in ci
    assert "pip install --no-deps moshi==0.2.13" in requirements.MOSHI_INSTALL
    assert version("moshi") == "0.2.13" and version("torch").startswith("2.13.0")
