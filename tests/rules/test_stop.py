"""stop: trial validity, immediate (the active turn ends), yield latency and the rule-based
subsequent stage (paper B.1, B.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import Verdict
from pytest_duplexact.data.taxonomy import STOP_FINAL_GRACE_S
from pytest_duplexact.rules import stop
from pytest_duplexact.rules.common import END_TOLERANCE_S
from tests.rules.helpers import ann, bc, segment_lists, sub
from tests.support.builders import timeline

ANN = ann(cue_start=0.0, cue_end=3.0)  # on the cue clip's clock; the rules read tl.cue
CUE = (4.0, 7.0)  # the intervention on the timeline: grace second is [6.0, 7.0]
DUR = 20.0


def latency(a, t):
    """yield_latency from the rule's own immediate result, as scoring computes it."""
    return stop.yield_latency(t, stop.immediate(a, t))


def subsequent(a, t):
    return stop.subsequent(t, stop.immediate(a, t))


def tl(*segments, cue=CUE, duration=DUR):
    return timeline(*segments, cue=cue, duration=duration)


# --- trial validity ------------------------------------------------------------------------------

def test_no_cue_is_excluded():
    r = stop.immediate(ANN, timeline(sub(0.0, 5.0)))
    assert r.verdict is Verdict.EXCLUDED and "no cue" in r.reason


@pytest.mark.parametrize("turn, speaking", [
    ((1.0, 4.0), False),  # ended exactly at cue onset
    ((1.0, 4.001), True),
    ((4.0, 6.0), True),  # started exactly at cue onset
    ((4.001, 6.0), False),  # started 1 ms after it
    ((1.0, 3.999), False),
])
def test_model_must_be_speaking_at_cue_onset(turn, speaking):
    r = stop.immediate(ANN, tl(sub(*turn)))
    assert (r.verdict is not Verdict.EXCLUDED) is speaking, r.reason
    if not speaking:
        assert "not speaking at cue onset (4.00 s)" in r.reason
        assert latency(ANN, tl(sub(*turn))) is None
        assert subsequent(ANN, tl(sub(*turn))).verdict is Verdict.NOT_APPLICABLE


def test_a_backchannel_active_at_cue_onset_is_the_active_turn():
    # "Speaking" is any model speech; its word count does not matter for validity.
    assert stop.immediate(ANN, tl(bc(3.5, 4.5, 2))).success


# --- immediate and yield latency ----------------------------------------------------------------

def test_active_turn_that_ends_succeeds_with_its_yield_latency():
    t = tl(sub(1.0, 5.25))
    r = stop.immediate(ANN, t)
    assert r.success and r.onset == 5.25 and "ends at 5.25 s" in r.reason
    assert r.evidence["active_turn"]["end"] == 5.25
    assert latency(ANN, t) == pytest.approx(1.25)


def test_no_deadline_a_late_stop_still_succeeds():
    t = tl(sub(1.0, 15.0))
    assert stop.immediate(ANN, t).success
    assert latency(ANN, t) == pytest.approx(11.0)


@pytest.mark.parametrize("end, ends", [
    (DUR, False),  # runs to the end of the recording
    (DUR - END_TOLERANCE_S, False),  # still sounding within the VAD's tolerance of the end
    (DUR - END_TOLERANCE_S - 0.001, True),
])
def test_turn_running_to_the_recording_end_fails(end, ends):
    t = tl(sub(1.0, end))
    r = stop.immediate(ANN, t)
    assert r.success is ends, r.reason
    if not ends:
        assert "never ends" in r.reason and f"{DUR:.2f} s" in r.reason
        assert latency(ANN, t) is None
        assert subsequent(ANN, t).verdict is Verdict.NOT_APPLICABLE


def test_only_the_turn_active_at_cue_onset_matters():
    # an earlier turn and a later one running to the end do not decide immediate
    t = tl(sub(0.0, 1.0), sub(2.0, 4.5), sub(10.0, DUR))
    assert stop.immediate(ANN, t).onset == 4.5


# --- subsequent --------------------------------------------------------------------------------

LIMIT = CUE[1] - STOP_FINAL_GRACE_S  # 6.0


@pytest.mark.parametrize("later, verdict", [
    ([], Verdict.SUCCESS),
    ([sub(5.5, 6.5)], Verdict.FAILURE),  # reclaims the floor mid-intervention
    ([sub(LIMIT - 0.001, 8.0)], Verdict.FAILURE),  # 1 ms before the grace second
    ([sub(LIMIT, 8.0)], Verdict.SUCCESS),  # exactly at the start of the grace second
    ([sub(6.5, 8.0)], Verdict.SUCCESS),  # inside the grace second
    ([sub(7.0, 9.0)], Verdict.SUCCESS),  # after the intervention
    ([bc(5.0, 5.3, 3), bc(5.6, 5.8, 1)], Verdict.SUCCESS),  # backchannels are not a turn
    ([bc(5.0, 5.3, 3), sub(5.6, 6.2, 4)], Verdict.FAILURE),
])
def test_subsequent_stays_yielded_until_the_last_second(later, verdict):
    t = tl(sub(1.0, 4.8), *later)
    r = subsequent(ANN, t)
    assert r.verdict is verdict, r.reason
    assert r.judge == "rule"
    if verdict is Verdict.FAILURE:
        assert "before its last 1 s" in r.reason and "[4.80, 6.00] s" in r.reason


@pytest.mark.parametrize("stop_at, verdict", [
    (7.5, Verdict.NOT_APPLICABLE),  # first stop after the intervention ended
    (7.0, Verdict.NOT_APPLICABLE),  # exactly at its end: never yielded during it
    (6.999, Verdict.SUCCESS),
    (6.2, Verdict.SUCCESS),  # stopped inside the grace second: nothing can fail
])
def test_subsequent_applicability(stop_at, verdict):
    t = tl(sub(1.0, stop_at), sub(stop_at + 0.1, stop_at + 2.0))
    r = subsequent(ANN, t)
    assert r.verdict is verdict, r.reason
    if verdict is Verdict.NOT_APPLICABLE:
        assert "intervention ended (7.00 s)" in r.reason


@settings(max_examples=150, deadline=None)
@given(st.integers(4001, 9000), segment_lists((6000, 7000), lo_ms=4001, hi_ms=15_000))
def test_subsequent_matches_an_independent_oracle(stop_ms, later):
    later = [s for s in later if s.start * 1000 >= stop_ms + 1]
    t = tl(sub(1.0, stop_ms / 1000), *later)
    r = subsequent(ANN, t)
    if stop_ms >= 7000:
        expected = Verdict.NOT_APPLICABLE
    elif any(len(s.text.split()) > 3 and round(s.start * 1000) < 6000 for s in later):
        expected = Verdict.FAILURE
    else:
        expected = Verdict.SUCCESS
    assert r.verdict is expected, r.reason
    assert latency(ANN, t) == pytest.approx(stop_ms / 1000 - 4.0)
