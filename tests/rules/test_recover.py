"""recover.immediate: a substantive onset inside [cue_end - 2.0 s, cue_end + 5.0 s];
recovery latency = that onset - cue end (paper B.1, B.9)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from pytest_duplexact.data.results import Verdict
from pytest_duplexact.data.taxonomy import RECOVER_WINDOW
from pytest_duplexact.rules import recover
from pytest_duplexact.rules.common import fmt_window
from tests.rules.helpers import ann, bc, edge_probes, segment_lists, sub
from tests.support.builders import timeline

ANN = ann(cue_start=0.0, cue_end=2.5)
CUE = (3.0, 5.5)  # window [3.5, 10.5]
SPEECH = [(0.0, 4.0)]  # the model was speaking when the interruption came


def recovery_latency(a, t):
    """recovery_latency from the rule's own immediate result, as scoring computes it."""
    return recover.recovery_latency(t, recover.immediate(a, t))


def tl(*segments, speech=SPEECH, cue=CUE):
    return timeline(*segments, speech=speech, cue=cue)


def test_window():
    assert RECOVER_WINDOW == (-2.0, 5.0)
    assert recover.window(tl()) == (3.5, 10.5)


@pytest.mark.parametrize("probe", range(6))
def test_onset_edges(probe):
    lo, hi = recover.window(tl())
    name, t, inside = edge_probes(lo, hi)[probe]
    r = recover.immediate(ANN, tl(sub(t, t + 1.0)))
    assert r.success is inside, (name, r.reason)
    assert r.window == (lo, hi) and fmt_window(lo, hi) in r.reason
    assert (recovery_latency(ANN, tl(sub(t, t + 1.0))) is not None) is inside


def test_three_words_are_no_recovery():
    assert not recover.immediate(ANN, tl(bc(6.0, 6.5, 3))).success
    assert recover.immediate(ANN, tl(sub(6.0, 6.5, 4))).success


def test_need_not_be_the_first_onset():
    t = tl(sub(1.0, 3.2), bc(5.6, 5.8), sub(7.0, 9.0))
    r = recover.immediate(ANN, t)
    assert r.success and r.onset == 7.0 and "+1.50 s of the interruption end" in r.reason


@pytest.mark.parametrize("onset, latency", [(4.0, -1.5), (5.5, 0.0), (8.75, 3.25)])
def test_latency_relative_to_interruption_end(onset, latency):
    assert recovery_latency(ANN, tl(sub(onset, onset + 1))) == pytest.approx(latency)


def test_failure_reason():
    r = recover.immediate(ANN, tl(sub(11.0, 12.0)))
    assert r.verdict is Verdict.FAILURE
    assert "interruption ends 5.50 s" in r.reason
    assert recovery_latency(ANN, tl(sub(11.0, 12.0))) is None


@pytest.mark.parametrize("speech, cue", [
    ([(0.0, 3.0)], CUE),  # speech ended exactly as the cue began
    ([], CUE),
    ([(0.0, 3.0)], None),
])
def test_excluded_when_the_cue_does_not_meet_model_speech(speech, cue):
    r = recover.immediate(ANN, tl(sub(6.0, 8.0), speech=speech, cue=cue))
    assert r.verdict is Verdict.EXCLUDED


@settings(max_examples=150, deadline=None)
@given(segment_lists((3500, 10_500, 5500), hi_ms=14_000))
def test_verdict_and_latency_match_an_independent_oracle(segments):
    hits = [s for s in segments if len(s.text.split()) > 3
            and 3500 <= round(s.start * 1000) <= 10_500]
    t = tl(*segments)
    assert recover.immediate(ANN, t).success == bool(hits)
    lat = recovery_latency(ANN, t)
    assert (lat is None) == (not hits)
    if hits:
        assert lat == pytest.approx(hits[0].start - 5.5)
