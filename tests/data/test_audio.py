"""audio.write: WAV files are converted to PCM-16 in numpy (fast), byte for byte as libsndfile
converts float audio itself."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data import audio


def _signal() -> np.ndarray:
    rng = np.random.default_rng(3)
    edges = [1.0, -1.0, 1.5, -1.5, 0.5 / 32768, -0.5 / 32768, 1.5 / 32768, 3.0, -7.0, 0.0,
             1e-9, -1e-9, 0.99999, -0.99999]
    return np.concatenate([rng.standard_normal(50_000).astype(np.float32) * 0.7,
                           np.asarray(edges, np.float32)])


@pytest.mark.skipif(not sf.__libsndfile_version__.startswith("1.2"),
                    reason="the float -> PCM-16 rule compared is libsndfile 1.2's")
def test_wav_bytes_equal_libsndfiles_own_conversion(tmp_path):
    x = _signal()
    audio.write(tmp_path / "ours.wav", x)
    sf.write(str(tmp_path / "theirs.wav"), x, audio.SAMPLE_RATE, format="WAV", subtype="PCM_16")
    assert (tmp_path / "ours.wav").read_bytes() == (tmp_path / "theirs.wav").read_bytes()


def test_wav_round_trip_within_one_step_and_clipped(tmp_path):
    x = _signal()
    audio.write(tmp_path / "a.wav", x)
    y = audio.read(tmp_path / "a.wav")
    inside = np.abs(x) < 1
    assert np.all((x[inside] - y[inside] >= 0) & (x[inside] - y[inside] < 1 / 32768))
    assert y.max() == pytest.approx(32767 / 32768) and y.min() == -1.0
    assert not list(tmp_path.glob(".*.part"))
