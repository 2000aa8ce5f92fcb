"""take_turn.immediate: any substantive onset inside the condition's window relative to the
user-speech end (paper B.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.rules import take_turn
from tests.rules.helpers import ann, bc, edge_probes, segment_lists, sub
from tests.support.builders import timeline

USER_END = 6.3
ANN = ann(user_start=0.4, user_end=USER_END)
CONDITIONS = [c.id for c in taxonomy.conditions_of("take_turn")]


def rel(condition: str) -> str:
    lo, hi = taxonomy.TAKE_TURN_WINDOWS[condition]
    return f"[{lo:g}, {hi:g}] s of user end"


@pytest.mark.parametrize("condition", CONDITIONS)
def test_window_is_relative_to_user_end(condition):
    lo, hi = taxonomy.TAKE_TURN_WINDOWS[condition]
    assert take_turn.window(ANN, condition) == (USER_END + lo, USER_END + hi)


def test_paper_windows():
    assert taxonomy.TAKE_TURN_WINDOWS == {"immediate": (0.0, 0.5), "delayed": (0.0, 3.0),
                                          "slight_overlap": (-1.0, 0.5)}


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("probe", range(6))
def test_onset_edges(condition, probe):
    lo, hi = take_turn.window(ANN, condition)
    name, t, inside = edge_probes(lo, hi)[probe]
    r = take_turn.immediate(ANN, timeline(sub(t, t + 2.0)), condition)
    assert r.success is inside, (name, r.reason)
    assert r.window == (lo, hi) and rel(condition) in r.reason
    if inside:
        assert r.onset == t


@pytest.mark.parametrize("condition", CONDITIONS)
def test_three_words_are_no_turn(condition):
    lo, _ = take_turn.window(ANN, condition)
    assert not take_turn.immediate(ANN, timeline(bc(lo, lo + 1, 3)), condition).success
    assert take_turn.immediate(ANN, timeline(sub(lo, lo + 1, 4)), condition).success


def test_a_later_qualifying_onset_counts_not_only_the_first():
    # An early substantive false start (before the window), then a qualifying onset.
    tl = timeline(sub(4.0, 5.0), bc(6.35, 6.5), sub(6.6, 9.0))
    r = take_turn.immediate(ANN, tl, "immediate")
    assert r.success and r.onset == 6.6 and "+0.30 s" in r.reason


def test_slight_overlap_allows_but_does_not_require_overlap():
    assert take_turn.immediate(ANN, timeline(sub(5.3, 8.0)), "slight_overlap").success
    assert take_turn.immediate(ANN, timeline(sub(6.8, 8.0)), "slight_overlap").success
    assert not take_turn.immediate(ANN, timeline(sub(5.299, 8.0)), "slight_overlap").success
    # ... and a long overlap that started earlier is no onset in the window
    assert not take_turn.immediate(ANN, timeline(sub(3.0, 8.0)), "slight_overlap").success


def test_failure_reasons_say_where_and_why():
    r = take_turn.immediate(ANN, timeline(sub(7.0, 8.0), sub(12.0, 13.0)), "immediate")
    assert r.verdict is Verdict.FAILURE and "+0.70 s, outside [0, 0.5] s" in r.reason
    r = take_turn.immediate(ANN, timeline(bc(6.4, 6.6)), "immediate")
    assert "no substantive model speech at all" in r.reason and "[0, 0.5] s" in r.reason


# --- properties --------------------------------------------------------------------------------

EDGES_MS = (5300, 6300, 6800, 9300)
# every condition whose window contains another's: (narrow, wide)
NESTED = [(a, b) for a in CONDITIONS for b in CONDITIONS if a != b
          and taxonomy.TAKE_TURN_WINDOWS[b][0] <= taxonomy.TAKE_TURN_WINDOWS[a][0]
          and taxonomy.TAKE_TURN_WINDOWS[a][1] <= taxonomy.TAKE_TURN_WINDOWS[b][1]]


def test_nesting_includes_delayed_over_immediate():
    assert ("immediate", "delayed") in NESTED and ("immediate", "slight_overlap") in NESTED


@settings(max_examples=200, deadline=None)
@given(segment_lists(EDGES_MS, hi_ms=12_000), st.sampled_from(NESTED))
def test_success_is_monotone_in_window_widening(segments, pair):
    narrow, wide = pair
    tl = timeline(*segments)
    if take_turn.immediate(ANN, tl, narrow).success:
        assert take_turn.immediate(ANN, tl, wide).success


@settings(max_examples=200, deadline=None)
@given(segment_lists(EDGES_MS, hi_ms=12_000), st.sampled_from(CONDITIONS))
def test_verdict_matches_an_independent_oracle(segments, condition):
    lo, hi = (round((USER_END + x) * 1000) for x in taxonomy.TAKE_TURN_WINDOWS[condition])
    ok = any(len(s.text.split()) > 3 and lo <= round(s.start * 1000) <= hi for s in segments)
    r = take_turn.immediate(ANN, timeline(*segments), condition)
    assert r.success == ok
    assert rel(condition) in r.reason
    assert r == take_turn.immediate(ANN, timeline(*segments), condition)


def test_a_miss_near_the_edge_prints_enough_digits_and_carries_its_onset():
    """+0.502 s is outside [-1, 0.5]: printed as +0.50 it would read as a contradiction; the
    onset the reason names is the one outcome.json keeps (the HTML's dashed red line)."""
    onset = USER_END + 0.502
    r = take_turn.immediate(ANN, timeline(sub(onset, onset + 2)), "slight_overlap")
    assert r.verdict is Verdict.FAILURE and r.onset == onset
    assert "onset at +0.502 s, outside [-1, 0.5] s" in r.reason
    inside = take_turn.immediate(ANN, timeline(sub(USER_END + 0.3, USER_END + 2)),
                                 "slight_overlap")
    assert "onset at +0.30 s, inside" in inside.reason  # away from an edge: two decimals
