"""The streaming duplex's input resampler: the expected input resampled once gives what the
push-by-push path gives (both as if the signal were resampled whole), and a push that is not
the expected input takes the push-by-push path."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE, resample
from pytest_duplexact.pipelines.streaming_duplex import _InputResampler

STEP = 640  # the pipelines' 40 ms pushes


def _signal(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.standard_normal(len(t))
            ).astype(np.float32)


def _pushed(r: _InputResampler, x: np.ndarray, expect: bool) -> np.ndarray:
    if expect:
        r.expect(x)
    return np.concatenate([r(x[i: i + STEP]) for i in range(0, len(x), STEP)])


def _snr_db(ref: np.ndarray, y: np.ndarray) -> float:
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - y) ** 2), 1e-30))


@pytest.mark.parametrize("rate", [24_000, 22_050, 8_000])
def test_expected_input_gives_the_same_output_as_push_by_push(rate):
    clip, gap = _signal(0.5, 1), np.zeros(STEP * 3 + 100, np.float32)
    fast, slow = _InputResampler(rate), _InputResampler(rate)
    # two expected segments back to back (the clip, then the observation's silence), then a
    # push the pipeline did not announce
    y_fast = np.concatenate([_pushed(fast, clip, True), _pushed(fast, gap, True),
                             fast(clip[:STEP])])
    y_slow = np.concatenate([_pushed(slow, clip, False), _pushed(slow, gap, False),
                             slow(clip[:STEP])])
    assert len(y_fast) == len(y_slow) and fast.emitted == slow.emitted
    whole = resample(np.concatenate([clip, gap, clip[:STEP]]), SAMPLE_RATE, rate)
    n = len(y_fast)
    # the push-by-push path's 4 ms lookahead is short for a downsampling filter (74 dB at
    # 8 kHz); resampled ahead, the filter sees the whole segment
    assert _snr_db(whole[:n], y_fast) > 100 and _snr_db(whole[:n], y_slow) > 70


def test_a_push_other_than_the_expected_one_is_resampled_as_pushed():
    clip, other = _signal(0.3, 2), _signal(0.3, 3)
    r, ref = _InputResampler(24_000), _InputResampler(24_000)
    r.expect(clip)
    y = np.concatenate([r(clip[:STEP]), r(other[STEP: 2 * STEP]), r(clip[2 * STEP: 3 * STEP])])
    want = np.concatenate([ref(clip[:STEP]), ref(other[STEP: 2 * STEP]),
                           ref(clip[2 * STEP: 3 * STEP])])
    assert len(y) == len(want)
    assert _snr_db(want, y) > 100


def test_planned_then_adopted_equals_expect_and_a_push_between_drops_the_plan():
    """``plan`` + ``adopt`` (the resampling done on another thread) is ``expect``, to the
    sample; input pushed between the two takes the push-by-push path, never stale output."""
    clip, gap = _signal(0.4, 4), np.zeros(STEP * 5, np.float32)
    split, whole = _InputResampler(24_000), _InputResampler(24_000)
    rest = clip[STEP:]
    assert np.array_equal(split(clip[:STEP]), whole(clip[:STEP]))  # a left context first
    whole.expect(rest)
    plan = split.plan(rest)
    split.adopt(plan, resample(plan.signal, SAMPLE_RATE, 24_000))
    a = np.concatenate([split(rest[i: i + STEP]) for i in range(0, len(rest), STEP)])
    b = np.concatenate([whole(rest[i: i + STEP]) for i in range(0, len(rest), STEP)])
    assert len(a) > 0 and np.array_equal(a, b)

    late, ref = _InputResampler(24_000), _InputResampler(24_000)
    plan = late.plan(gap)
    got = [late(clip[:STEP])]  # pushed while the plan was being resampled
    late.adopt(plan, np.full(len(plan.signal) * 3 // 2, 9.0, np.float32))  # stale: dropped
    got += [late(gap[i: i + STEP]) for i in range(0, len(gap), STEP)]
    want = [ref(clip[:STEP])] + [ref(gap[i: i + STEP]) for i in range(0, len(gap), STEP)]
    assert np.array_equal(np.concatenate(got), np.concatenate(want))
