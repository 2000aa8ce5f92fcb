"""interrupt.immediate: a substantive onset inside [user_start, user_end - 1.0 s]; timing
difference = onset - interrupt_target, negative = early (paper B.1, B.6)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from pytest_duplexact.data.results import Verdict
from pytest_duplexact.data.taxonomy import INTERRUPT_END_MARGIN_S
from pytest_duplexact.rules import interrupt
from pytest_duplexact.rules.common import fmt_window
from tests.rules.helpers import ann, bc, edge_probes, segment_lists, sub
from tests.support.builders import timeline

ANN = ann(user_start=0.8, user_end=12.4, interrupt_target=7.0)  # window [0.8, 11.4]


def timing_difference(a, t):
    """The timing from the rule's own immediate result, as scoring computes it."""
    return interrupt.timing_difference(a, interrupt.immediate(a, t))


def test_window():
    assert INTERRUPT_END_MARGIN_S == 1.0
    assert interrupt.window(ANN) == pytest.approx((0.8, 11.4))


@pytest.mark.parametrize("probe", range(6))
def test_onset_edges(probe):
    lo, hi = interrupt.window(ANN)
    name, t, inside = edge_probes(lo, hi)[probe]
    r = interrupt.immediate(ANN, timeline(sub(t, t + 2.0)))
    assert r.success is inside, (name, r.reason)
    assert r.window == (lo, hi) and fmt_window(lo, hi) in r.reason


def test_onset_in_the_final_second_is_turn_entry_not_interruption():
    r = interrupt.immediate(ANN, timeline(sub(11.9, 14.0)))
    assert r.verdict is Verdict.FAILURE
    assert "after the window at 11.90 s" in r.reason and "user ends 12.40 s" in r.reason


def test_three_words_are_no_interruption_four_are():
    assert not interrupt.immediate(ANN, timeline(bc(5.0, 5.5, 3))).success
    r = interrupt.immediate(ANN, timeline(bc(5.0, 5.5, 3), sub(6.0, 8.0, 4)))
    assert r.success and r.onset == 6.0


def test_no_speech():
    r = interrupt.immediate(ANN, timeline())
    assert not r.success and "no substantive onset" in r.reason


def test_user_speech_under_a_second_leaves_no_window():
    a = ann(user_start=2.0, user_end=2.9, interrupt_target=2.5)
    r = interrupt.immediate(a, timeline(sub(2.0, 3.0)))
    assert r.verdict is Verdict.FAILURE
    assert timing_difference(a, timeline(sub(2.0, 3.0))) is None


@pytest.mark.parametrize("onset, diff", [(5.5, -1.5), (7.0, 0.0), (9.25, 2.25)])
def test_timing_difference_is_onset_minus_target_negative_early(onset, diff):
    assert timing_difference(ANN, timeline(sub(onset, onset + 2))) == \
        pytest.approx(diff)


def test_timing_uses_the_first_qualifying_onset_and_never_decides_success():
    t = timeline(bc(1.0, 1.2), sub(2.0, 3.0), sub(8.0, 9.0))
    assert interrupt.immediate(ANN, t).onset == 2.0
    assert timing_difference(ANN, t) == pytest.approx(-5.0)
    # a target is not needed to succeed, only to time
    no_target = ann(user_start=0.8, user_end=12.4)
    assert interrupt.immediate(no_target, t).success
    assert timing_difference(no_target, t) is None


def test_no_timing_on_failure():
    assert timing_difference(ANN, timeline(sub(12.0, 13.0))) is None


@settings(max_examples=150, deadline=None)
@given(segment_lists((800, 11_400, 12_400, 7000), hi_ms=15_000))
def test_verdict_and_timing_match_an_independent_oracle(segments):
    hits = [s for s in segments if len(s.text.split()) > 3
            and 800 <= round(s.start * 1000) <= 11_400]
    t = timeline(*segments)
    assert interrupt.immediate(ANN, t).success == bool(hits)
    diff = timing_difference(ANN, t)
    assert (diff is None) == (not hits)
    if hits:
        assert diff == pytest.approx(hits[0].start - 7.0)
