"""ignore.immediate: no substantive segment overlaps the distractor [other_start, other_end]
(paper B.8)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import Verdict
from pytest_duplexact.rules import ignore
from pytest_duplexact.rules.common import fmt_window
from tests.rules.helpers import (
    OVERLAP_EDGE_CASES,
    OVERLAP_IDS,
    ann,
    bc,
    segment_lists,
    shifted,
    sub,
)
from tests.support.builders import timeline

ANN = ann(user_start=0.5, user_end=9.0, other_start=4.0, other_end=6.25)


def test_window_is_the_distractor():
    assert ignore.window(ANN) == (4.0, 6.25)


@pytest.mark.parametrize("name, build, ok", OVERLAP_EDGE_CASES, ids=OVERLAP_IDS)
def test_edges(name, build, ok):
    lo, hi = ignore.window(ANN)
    r = ignore.immediate(ANN, timeline(sub(*build(lo, hi))))
    assert r.success is ok, r.reason
    assert r.window == (lo, hi) and fmt_window(lo, hi) in r.reason


def test_three_words_may_overlap_four_may_not():
    assert ignore.immediate(ANN, timeline(bc(3.0, 7.0, 3))).success
    r = ignore.immediate(ANN, timeline(bc(3.0, 3.5, 2), sub(5.0, 7.0, 4)))
    assert r.verdict is Verdict.FAILURE and r.onset == 5.0
    assert "distractor" in r.reason and "5.00-7.00" in r.reason


def test_answering_the_user_outside_the_distractor_is_fine():
    # Speech during the addressed part of the turn is not this rule's business (wait's is).
    assert ignore.immediate(ANN, timeline(sub(1.0, 3.9), sub(6.3, 9.0))).success


@settings(max_examples=150, deadline=None)
@given(segment_lists((4000, 6250), hi_ms=12_000), st.integers(1, 20_000))
def test_moving_speech_away_never_breaks_an_ignore(segments, d_ms):
    lo, hi = ignore.window(ANN)
    d = d_ms / 1000
    away = [shifted(s, -d) if s.start < hi else shifted(s, d) for s in segments]
    if ignore.immediate(ANN, timeline(*segments)).success:
        assert ignore.immediate(ANN, timeline(*away)).success
    if segments:
        out = [shifted(s, hi - min(x.start for x in segments) + d) for s in segments]
        assert ignore.immediate(ANN, timeline(*out)).success


@settings(max_examples=150, deadline=None)
@given(segment_lists((4000, 6250), hi_ms=12_000))
def test_verdict_matches_an_independent_oracle(segments):
    bad = [s for s in segments if len(s.text.split()) > 3
           and max(round(s.start * 1000), 4000) < min(round(s.end * 1000), 6250)]
    r = ignore.immediate(ANN, timeline(*segments))
    assert r.success == (not bad)
    assert r == ignore.immediate(ANN, timeline(*segments))  # deterministic
