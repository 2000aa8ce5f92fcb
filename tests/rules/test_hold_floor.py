"""hold_floor.immediate: speech through [cue_start, cue_end + 1.0 s] with no silence gap over
0.50 s, leading and trailing gaps included (paper B.5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import Verdict
from pytest_duplexact.rules import hold_floor
from pytest_duplexact.rules.common import fmt_window
from tests.rules.helpers import ann, bc, instants, sub
from tests.support.builders import timeline

ANN = ann(cue_start=0.0, cue_end=1.5)
CUE = (2.0, 3.5)  # window [2.0, 4.5]


def run(speech, cue=CUE, segments=None):
    segments = segments if segments is not None else [sub(a, b) for a, b in speech]
    return hold_floor.immediate(ANN, timeline(*segments, speech=speech, cue=cue))


def test_window():
    assert hold_floor.window(timeline(cue=CUE)) == (2.0, 4.5)


@pytest.mark.parametrize("speech, ok", [
    ([(0.0, 6.0)], True),  # talks straight through
    ([(0.0, 3.0), (3.5, 6.0)], True),  # inner gap exactly 0.50 s
    ([(0.0, 3.0), (3.51, 6.0)], False),  # 0.51 s
    ([(0.0, 3.53), (4.03, 6.0)], True),  # 0.50 s that floats compute as 0.5000000000000004
    ([(0.0, 3.9), (4.4, 6.0)], True),  # same, other numbers
    ([(2.5, 6.0)], True),  # leading gap exactly 0.50 s (speech starts mid-cue)
    ([(2.501, 6.0)], False),  # leading gap 0.501 s
    ([(0.0, 4.0)], True),  # trailing gap exactly 0.50 s
    ([(0.0, 3.999)], False),  # trailing gap 0.501 s: stopped right after the cue
    ([(0.0, 3.0), (3.4, 3.6), (4.0, 4.5)], True),  # several short gaps
])
def test_gap_edges(speech, ok):
    r = run(speech)
    assert r.success is ok, r.reason
    assert r.window == (2.0, 4.5) and fmt_window(2.0, 4.5) in r.reason
    assert "longest_gap" in r.evidence
    if not ok:
        assert "silence gap of 0.5" in r.reason and "(max 0.50 s)" in r.reason


def test_the_float_cases_above_really_round_up():
    assert 4.03 - 3.53 > 0.5 and 4.4 - 3.9 > 0.5


def test_gaps_come_from_raw_speech_not_merged_segments():
    # One merged segment hides a 0.6 s VAD gap: the rule must see the gap.
    r = hold_floor.immediate(ANN, timeline(sub(0.0, 6.0), speech=[(0.0, 3.0), (3.6, 6.0)],
                                           cue=CUE))
    assert not r.success
    # Without raw speech the segments stand in.
    assert hold_floor.immediate(ANN, timeline(sub(0.0, 6.0), cue=CUE)).success


def test_words_do_not_matter_a_backchannel_holds_the_floor_too():
    assert hold_floor.immediate(ANN, timeline(bc(0.0, 6.0, 1), cue=CUE)).success


@pytest.mark.parametrize("speech", [
    [],  # no model speech at all (so none in the window either)
    [(0.0, 2.0)],  # ended exactly at cue onset
    [(3.5, 6.0)],  # started exactly at cue end
    [(0.0, 1.0), (4.0, 6.0)],  # silent during the cue, speech only in the tail second
])
def test_cue_not_overlapping_model_speech_is_excluded(speech):
    r = run(speech)
    assert r.verdict is Verdict.EXCLUDED and "did not overlap model speech" in r.reason


def test_no_cue_is_excluded():
    r = hold_floor.immediate(ANN, timeline(sub(0.0, 5.0)))
    assert r.verdict is Verdict.EXCLUDED and "no cue" in r.reason


def test_minimal_overlap_is_included_and_then_judged_on_gaps():
    r = run([(0.0, 2.001)])
    assert r.verdict is Verdict.FAILURE and "silence gap of 2.50 s" in r.reason


def test_speech_after_cue_decides_subsequent_applicability():
    assert hold_floor.has_speech_after_cue(timeline(sub(0.0, 3.6), cue=CUE))
    assert not hold_floor.has_speech_after_cue(timeline(sub(0.0, 3.5), cue=CUE))
    assert hold_floor.has_speech_after_cue(timeline(sub(0.0, 1.0), sub(9.0, 10.0), cue=CUE))


# --- properties: an independent, 1 ms grid oracle ----------------------------------------------

@st.composite
def speech_spans(draw):
    n = draw(st.integers(0, 5))
    pts = sorted(draw(st.lists(instants((2000, 3500, 4500, 2500, 4000), 0, 7000),
                               min_size=2 * n, max_size=2 * n, unique=True)))
    return [(pts[2 * i] / 1000, pts[2 * i + 1] / 1000) for i in range(n)]


def oracle(speech, cue_ms=(2000, 3500)) -> tuple[bool, int | None]:
    """(cue overlaps speech, longest silent run in ms inside the window) on a 1 ms grid."""
    grid = np.zeros(8000, bool)
    for a, b in speech:
        grid[round(a * 1000):round(b * 1000)] = True
    lo, hi = cue_ms[0], cue_ms[1] + 1000
    overlaps = bool(grid[cue_ms[0]:cue_ms[1]].any())
    longest = run_ = 0
    for on in grid[lo:hi]:
        run_ = 0 if on else run_ + 1
        longest = max(longest, run_)
    return overlaps, longest


@settings(max_examples=200, deadline=None)
@given(speech_spans())
def test_verdict_matches_the_grid_oracle(speech):
    overlaps, longest = oracle(speech)
    r = run(speech)
    if not overlaps:
        assert r.verdict is Verdict.EXCLUDED
        return
    assert r.success == (longest <= 500), (speech, longest, r.reason)
    if r.success:  # success implies every gap <= 0.5 s
        assert r.evidence["longest_gap"] == pytest.approx(longest / 1000)


@settings(max_examples=100, deadline=None)
@given(speech_spans(), st.integers(1, 3000))
def test_adding_speech_never_breaks_a_hold(speech, extra_ms):
    # filling silence cannot lengthen a gap
    before = run(speech)
    after = run(speech + [(2.0, 2.0 + extra_ms / 1000)])
    if before.success:
        assert after.success
