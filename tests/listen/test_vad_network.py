"""The VAD's two network backends (vad_network.py): ONNX Runtime gives the same spans as
TorchScript on every bundled clip and on the noise grid, the choice is read from the
environment, and the cache never mixes their results."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.listen import degrade, vad, vad_network
from pytest_duplexact.rules import requires

SR = 16_000


@pytest.fixture(scope="module")
def clips() -> list[tuple[str, np.ndarray]]:
    seen, out = set(), []
    for inst in load_dataset(bundled_root(), requires=requires).instances:
        for clip in inst.clips.values():
            if clip.path not in seen:
                seen.add(clip.path)
                out.append((clip.path.name, vad.as_mono(clip.load(), SR)))
    return out


def spans(x: np.ndarray, backend: str) -> list[tuple[int, int]]:
    probs = vad.speech_probabilities(x, vad.DEFAULT_PARAMS.skip_quiet_ms, backend)
    return vad.postprocess(x, probs)


@pytest.mark.slow
def test_onnx_and_torch_find_the_same_spans_on_every_bundled_clip(clips):
    assert len(clips) == 140
    worst = 0.0
    for name, x in clips:  # as the harness runs them: quiet stretches skipped
        a, b = (vad.speech_probabilities(x, vad.DEFAULT_PARAMS.skip_quiet_ms, backend)
                for backend in ("onnx", "torch"))
        worst = max(worst, float(np.abs(a - b).max()))
        assert vad.postprocess(x, a) == vad.postprocess(x, b), name
    assert worst < 1e-3  # measured 5e-5: float rounding, not another network


# the grid's noise and codec conditions, and one of real model audio where split_quiet cuts
# the most; benchmarks/vad_backends.py compares the whole grid
@pytest.mark.parametrize("condition", [c for c in degrade.GRID if degrade.parse(c)[0] in
                                       ("white", "babble", "codec")] + ["murmur-48"])
def test_onnx_and_torch_find_the_same_spans_on_the_noise_grid(clips, condition):
    # twelve clips of every role joined with pauses: ~40 s of speech and silence
    picked = [x for _, x in clips[::12]]
    gap = np.zeros(SR // 2, np.float32)
    x = degrade.apply(condition, np.concatenate([p for c in picked for p in (c, gap)]), seed=3)
    assert spans(x, "onnx") == spans(x, "torch")


def test_skipped_frames_are_skipped_the_same_way_by_both_backends():
    """A selection of frames is run as if contiguous: each frame's context is the previous
    selected frame's tail, as TorchScript's internal context would be."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(SR * 3) * 0.05).astype(np.float32)
    run = np.zeros(-(-len(x) // vad.FRAME), dtype=bool)
    run[[0, 1, 2, 10, 11, 40, 41, 42, 93]] = True  # 93: the last, short frame
    a, b = vad_network.probabilities_onnx(x, run), vad_network.probabilities_torch(x, run)
    assert a.shape == b.shape == (9,)
    np.testing.assert_allclose(a, b, atol=1e-3)
    assert len(vad_network.probabilities_onnx(x, np.zeros_like(run))) == 0


def test_the_backend_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(vad_network.ENV, "torch")
    assert vad_network.backend() == "torch"
    monkeypatch.setenv(vad_network.ENV, "ONNX ")
    assert vad_network.backend() == "onnx"
    monkeypatch.delenv(vad_network.ENV)
    assert vad_network.backend() == "onnx"  # auto: onnxruntime is installed here
    monkeypatch.setenv(vad_network.ENV, "tensorflow")
    with pytest.raises(ValueError, match="DUPLEXACT_VAD_BACKEND='tensorflow'"):
        vad_network.backend()


def test_the_cache_key_names_the_backend(monkeypatch):
    x = np.zeros(SR, np.float32)
    monkeypatch.setenv(vad_network.ENV, "onnx")
    a = vad.cache_request(x, vad.DEFAULT_PARAMS)
    monkeypatch.setenv(vad_network.ENV, "torch")
    b = vad.cache_request(x, vad.DEFAULT_PARAMS)
    assert a["backend"] == "onnx" and a["onnxruntime"]
    assert b["backend"] == "torch" and b["torch"]
    assert a != b and a["audio_sha256"] == b["audio_sha256"]


def test_a_result_cached_by_one_backend_is_not_served_to_the_other(monkeypatch, tmp_path, clips):
    from pytest_duplexact.remote.cache import RequestCache

    cache = RequestCache(tmp_path)
    x = clips[0][1]
    monkeypatch.setenv(vad_network.ENV, "onnx")
    first = vad.speech_spans(x, SR, cache=cache)
    monkeypatch.setenv(vad_network.ENV, "torch")
    calls = []
    real = vad_network.probabilities_torch
    monkeypatch.setattr(vad_network, "probabilities_torch",
                        lambda *a: calls.append(1) or real(*a))
    assert vad.speech_spans(x, SR, cache=cache) == first
    assert calls, "the torch backend must compute its own result, not read onnx's"
