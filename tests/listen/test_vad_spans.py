"""``vad.spans_from_probabilities`` is silero's ``get_speech_timestamps_from_probs`` as the
VAD calls it (no padding, no length cap), written out so that a run need not import torch:
here it is held equal to silero's own, on random probabilities, at the thresholds' edges
and the minimum lengths' edges, with and without an audio length shorter than the frames."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from silero_vad import get_speech_timestamps_from_probs

from pytest_duplexact.listen import vad
from pytest_duplexact.listen.vad import FRAME, VAD_SAMPLE_RATE, VadParams


def silero(probs, n_samples, params: VadParams):
    raw = get_speech_timestamps_from_probs(
        [float(p) for p in probs], sampling_rate=VAD_SAMPLE_RATE, threshold=params.threshold,
        neg_threshold=params.neg_threshold, min_speech_duration_ms=params.min_speech_ms,
        min_silence_duration_ms=params.min_silence_ms, speech_pad_ms=0,
        audio_length_samples=n_samples)
    return [(int(s["start"]), int(s["end"])) for s in raw]


# probabilities that sit on the thresholds (0.5, 0.35 and the custom ones) as often as between
EDGES = [0.0, 0.01, 0.2, 0.3, 0.35, 0.349999, 0.4, 0.49999, 0.5, 0.500001, 0.6, 0.9, 1.0]
probability = st.one_of(st.sampled_from(EDGES), st.floats(0.0, 1.0))


@st.composite
def cases(draw):
    probs = draw(st.lists(probability, max_size=120))
    threshold = draw(st.sampled_from([0.5, 0.3, 0.6, 0.05]))
    neg = draw(st.one_of(st.none(), st.floats(0.01, threshold)))
    # minimum lengths around whole frames (32 ms): equal, one sample over, one under
    min_speech = draw(st.sampled_from([0, 31, 32, 33, 64, 100, 250]))
    min_silence = draw(st.sampled_from([0, 31, 32, 33, 64, 100, 300]))
    frames = len(probs) * FRAME
    n_samples = draw(st.one_of(st.just(frames), st.integers(0, frames + FRAME)))
    return probs, n_samples, VadParams(threshold=threshold, neg_threshold=neg,
                                       min_speech_ms=min_speech, min_silence_ms=min_silence)


@settings(max_examples=600, deadline=None)
@given(cases())
def test_equals_silero_on_any_probabilities(case):
    probs, n_samples, params = case
    assert vad.spans_from_probabilities(np.asarray(probs, np.float32), n_samples, params) == \
        silero(np.asarray(probs, np.float32), n_samples, params)


def test_equals_silero_on_the_bundled_clips_probabilities():
    """The probabilities the network gives on speech (float32, as the VAD passes them)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        steps = rng.integers(1, 30, size=20)
        levels = rng.choice([0.02, 0.3, 0.45, 0.55, 0.97], size=20)
        probs = np.repeat(levels, steps).astype(np.float32)
        assert vad.spans_from_probabilities(probs, len(probs) * FRAME) == \
            silero(probs, len(probs) * FRAME, vad.DEFAULT_PARAMS)


def test_a_run_on_the_onnx_backend_imports_no_torch():
    """The ONNX backend's whole path (weights found, network run, spans) without torch: the
    2 s its import costs every run (and every test's inner run) is not paid."""
    code = ("import sys, numpy as np\n"
            "from pytest_duplexact.listen import vad\n"
            "t = np.arange(48000) / 16000\n"
            "x = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 3 * t) > 0))"
            ".astype(np.float32)\n"
            "vad.speech_spans(x, 16000)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={"DUPLEXACT_VAD_BACKEND": "onnx",
                                           **_env()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _env():
    import os
    return {k: v for k, v in os.environ.items() if k != "DUPLEXACT_VAD_BACKEND"}
