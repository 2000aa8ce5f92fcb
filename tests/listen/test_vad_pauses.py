"""A pause that silero keeps stays a pause over breath, murmur, hum and decaying tails
(pytest_duplexact/listen/vad.py: split_quiet, refine_edges, keep_pauses, attach_islands;
docs/timeline.md). The post-processing is pure, so these run on synthetic silero output, no
network."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_duplexact.listen import vad
from pytest_duplexact.listen.segmentation import merge_spans

SR = 16_000
HOP = 32  # the envelope's hop: edges are placed to it


def _probs(n: int, high, low=()) -> np.ndarray:
    """Silero-like frame probabilities: 0.98 over ``high`` sample spans, 0.25 (voice-like,
    under threshold: what attach_islands may recover) over ``low``."""
    p = np.zeros(-(-n // vad.FRAME), np.float32)
    for value, spans in ((0.25, low), (0.98, high)):
        for a, b in spans:
            p[a // vad.FRAME: -(-b // vad.FRAME)] = value
    return p


def _quiet(kind: str, n: int, rng) -> np.ndarray:
    """``n`` samples of what is not speech, unscaled."""
    t = np.arange(n) / SR
    if kind == "breath":
        return rng.standard_normal(n) * np.hanning(n)
    if kind == "murmur":  # noise at a syllable rate
        phase = rng.uniform(0, 6)
        return rng.standard_normal(n) * (0.3 + np.abs(np.sin(2 * np.pi * 4 * t + phase)))
    if kind == "tail":  # a decaying tail from the speech before it, RT60 0.2-0.6 s
        return rng.standard_normal(n) * np.exp(-6.9 * t / rng.uniform(0.2, 0.6))
    return sum(np.sin(2 * np.pi * 50 * k * t) / k for k in range(1, 6))  # hum


def _max_envelope_db(x: np.ndarray) -> float:
    return float(vad.energy_envelope(x).max())


@settings(max_examples=30, deadline=None)
# a pause of exactly 0.3 s after post-processing, a few ulps short in seconds (merge_spans)
@example(level=-15.0, below=36.0, kinds=["tail"], gaps=[0.4], fill=0.875, seed=4931)
@given(level=st.floats(-35, -15), below=st.floats(20, 40),
       kinds=st.lists(st.sampled_from(["breath", "murmur", "tail", "hum"]), min_size=1,
                      max_size=3),
       gaps=st.lists(st.floats(0.3, 1.0), min_size=1, max_size=3),
       fill=st.floats(0.3, 1.0), seed=st.integers(0, 2**16))
def test_a_kept_pause_is_never_closed_across_audio_20_db_below_the_speech(
        level, below, kinds, gaps, fill, seed):
    """Phrases (noise at ``level`` dBFS RMS) with pauses of 0.3-1.0 s that silero keeps; each
    pause holds breath, murmur, a tail or hum whose loudest 8 ms is ``below`` dB (>= 20) under
    the speech, over ``fill`` of the pause from its start, and silero scores the pause 0.25
    (voice-like). Every pause silero keeps (>= 0.3 s between its spans) is still at least
    0.3 s (the merge gap) after post-processing and nothing in it becomes a span, so the
    phrases on either side stay apart."""
    rng = np.random.default_rng(seed)
    amp = 10 ** (level / 20)
    parts, high, pauses, pos = [np.zeros(int(0.4 * SR))], [], [], int(0.4 * SR)
    for k in range(len(gaps) + 1):
        n = int(rng.uniform(0.4, 0.8) * SR)
        parts.append(rng.standard_normal(n) * amp)
        high.append((pos, pos + n))
        pos += n
        if k == len(gaps):
            break
        g = int(round(gaps[k] * SR))
        quiet = np.zeros(g)
        m = max(int(fill * g), HOP * 8)
        q = _quiet(kinds[k % len(kinds)], m, rng)
        quiet[:m] = q * (10 ** ((level - below) / 20) / 10 ** (_max_envelope_db(q) / 20))
        parts.append(quiet)
        pauses.append((pos, pos + g))
        pos += g
    parts.append(np.zeros(int(0.4 * SR)))
    x = np.concatenate(parts).astype(np.float32)
    probs = _probs(len(x), high, low=pauses)
    out = vad.postprocess(x, probs)
    raw = vad.spans_from_probabilities(probs, len(x))
    assert len(raw) == len(high)
    keep = vad.KEEP_PAUSE_MS * SR // 1000
    kept = [(e, s2) for (_, e), (s2, _) in zip(raw, raw[1:]) if s2 - e >= keep]
    for a, b in kept:  # the pauses silero keeps (its edges are on 32 ms frames)
        before = [e for s, e in out if s < a]
        after = [s for s, e in out if e > b]
        assert before and after, (out, pauses)
        inside = [(s, e) for s, e in out if s >= max(before) and e <= min(after)]
        assert not inside, f"a span inside the pause {a, b}: {inside}"
        assert min(after) - max(before) >= keep - HOP, (out, (a, b))
    segments = merge_spans([vad.Span(s / SR, e / SR) for s, e in out])
    assert len(segments) >= len(kept) + 1


def test_a_pause_at_speech_level_may_close():
    """The other side of the rule: a word at speech level inside a kept pause (one silero
    scored below threshold) is recovered, so the pause shrinks under 0.3 s."""
    rng = np.random.default_rng(1)
    x = np.zeros(3 * SR, np.float32)
    x[int(0.3 * SR): int(1.0 * SR)] = rng.standard_normal(int(0.7 * SR)) * 0.05
    x[int(1.15 * SR): int(1.3 * SR)] = rng.standard_normal(int(0.15 * SR)) * 0.04  # a word
    x[int(1.45 * SR): int(2.2 * SR)] = rng.standard_normal(int(0.75 * SR)) * 0.05
    probs = _probs(len(x), [(int(0.3 * SR), int(1.0 * SR)), (int(1.45 * SR), int(2.2 * SR))],
                   low=[(int(1.15 * SR), int(1.3 * SR))])
    out = vad.postprocess(x, probs)
    assert len(out) == 3 and len(merge_spans([vad.Span(s / SR, e / SR) for s, e in out])) == 1


def test_an_onset_lands_on_the_speech_not_on_a_click_before_it():
    """Silero's span starts on a click and codec noise (-51 dBFS, 0.1 s ahead of speech at
    -26 dBFS); the onset goes to the speech."""
    rng = np.random.default_rng(2)
    x = np.zeros(3 * SR, np.float32)
    x[int(0.9 * SR): int(0.95 * SR)] = rng.standard_normal(int(0.05 * SR)) * 10 ** (-51 / 20)
    x[int(0.9 * SR)] = 0.03  # the click
    x[int(1.05 * SR): int(2.0 * SR)] = rng.standard_normal(int(0.95 * SR)) * 10 ** (-26 / 20)
    out = vad.postprocess(x, _probs(len(x), [(int(0.9 * SR), int(2.0 * SR))]))
    assert len(out) == 1 and abs(out[0][0] - 1.05 * SR) <= 2 * HOP, out


def test_silero_running_on_over_murmur_is_cut_back_to_the_speech():
    """Silero is level-blind: a span that runs 1.5 s early over murmur 25 dB under the speech
    (the onset a real model output moved from 4.35 to 2.87 s) starts on the speech, and a
    span of murmur alone is dropped."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(6 * SR) * 10 ** (-51 / 20)
         * (0.3 + np.abs(np.sin(2 * np.pi * 4 * np.arange(6 * SR) / SR)))).astype(np.float32)
    x[int(2.5 * SR): int(3.5 * SR)] += rng.standard_normal(SR).astype(np.float32) * 10 ** (-26 / 20)
    probs = _probs(len(x), [(int(1.0 * SR), int(3.6 * SR)), (int(4.5 * SR), int(5.5 * SR))])
    out = vad.postprocess(x, probs)
    assert len(out) == 1, out
    assert abs(out[0][0] - 2.5 * SR) <= 0.02 * SR and abs(out[0][1] - 3.5 * SR) <= 0.05 * SR, out
