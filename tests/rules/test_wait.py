"""wait.immediate: no substantive segment overlaps the wait window (paper B.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.rules import wait
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

ANN = ann(user_start=1.0, user_end=8.0, pause_start=3.0, pause_end=3.6)
CONDITIONS = [c.id for c in taxonomy.conditions_of("wait")]
PAUSES = [c for c in CONDITIONS if c != "continuous_speech"]


def test_window_per_condition():
    for c in CONDITIONS:
        expected = (1.0, 8.0) if c == "continuous_speech" else (3.0, 3.6)
        assert wait.window(ANN, c) == expected


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("name, build, ok", OVERLAP_EDGE_CASES, ids=OVERLAP_IDS)
def test_edges(condition, name, build, ok):
    lo, hi = wait.window(ANN, condition)
    r = wait.immediate(ANN, timeline(sub(*build(lo, hi))), condition)
    assert r.success is ok, r.reason
    assert r.window == (lo, hi)
    assert fmt_window(lo, hi) in r.reason


@pytest.mark.parametrize("condition", CONDITIONS)
def test_three_words_may_overlap_four_may_not(condition):
    lo, hi = wait.window(ANN, condition)
    assert wait.immediate(ANN, timeline(bc(lo - 1, hi + 1, 3)), condition).success
    r = wait.immediate(ANN, timeline(sub(lo - 1, hi + 1, 4)), condition)
    assert r.verdict is Verdict.FAILURE
    assert r.onset == lo - 1
    assert "alpha bravo charlie delta" in r.reason


@pytest.mark.parametrize("condition", PAUSES)
def test_pause_conditions_do_not_require_waiting_for_the_turn_end(condition):
    # Substantive speech after the pause, while the user still talks, is not a wait failure.
    tl = timeline(sub(3.6, 7.0))
    assert wait.immediate(ANN, tl, condition).success
    assert not wait.immediate(ANN, tl, "continuous_speech").success


def test_no_speech_is_a_wait():
    r = wait.immediate(ANN, timeline(), "continuous_speech")
    assert r.success and "[1.00, 8.00] s" in r.reason


def test_failure_lists_every_offender():
    tl = timeline(sub(3.1, 3.2), bc(3.3, 3.4), sub(3.5, 4.0, 6))
    r = wait.immediate(ANN, tl, "inter_sentential_pause")
    assert not r.success and r.onset == 3.1
    assert "3.10-3.20" in r.reason and "3.50-4.00" in r.reason and "3.30-3.40" not in r.reason


# --- properties --------------------------------------------------------------------------------

EDGES_MS = (1000, 8000, 3000, 3600)


@settings(max_examples=150, deadline=None)
@given(segment_lists(EDGES_MS, hi_ms=12_000), st.sampled_from(CONDITIONS),
       st.integers(1, 20_000))
def test_moving_speech_away_from_the_window_never_breaks_a_wait(segments, condition, d_ms):
    lo, hi = wait.window(ANN, condition)
    d = d_ms / 1000
    before = wait.immediate(ANN, timeline(*segments), condition)
    # every segment that does not start after the window end moves earlier, the rest later
    away = [shifted(s, -d) if s.start < hi else shifted(s, d) for s in segments]
    after = wait.immediate(ANN, timeline(*away), condition)
    if before.success:
        assert after.success
    out = [shifted(s, hi - min(x.start for x in segments) + d) for s in segments]
    assert wait.immediate(ANN, timeline(*out), condition).success


@settings(max_examples=150, deadline=None)
@given(segment_lists(EDGES_MS, hi_ms=12_000), st.sampled_from(CONDITIONS))
def test_verdict_matches_an_independent_oracle(segments, condition):
    lo, hi = wait.window(ANN, condition)
    # integer-ms oracle: any substantive segment sharing at least one whole ms with the window
    bad = [s for s in segments if len(s.text.split()) > 3
           and max(round(s.start * 1000), round(lo * 1000)) < min(round(s.end * 1000),
                                                                  round(hi * 1000))]
    r = wait.immediate(ANN, timeline(*segments), condition)
    assert r.success == (not bad)
    assert fmt_window(lo, hi) in r.reason
