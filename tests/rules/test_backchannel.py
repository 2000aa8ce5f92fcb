"""backchannel.immediate: candidate rule + two judge stages as data (paper B.7)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.rules import backchannel
from pytest_duplexact.rules.backchannel import Judgement
from pytest_duplexact.rules.common import fmt_window
from tests.rules.helpers import ann, bc, edge_probes, segment_lists, sub
from tests.support.builders import timeline

ANN = ann(user_start=1.0, user_end=7.5, backchannel_point=4.0)
CONDITIONS = [c.id for c in taxonomy.conditions_of("backchannel")]
YES = Judgement(True, "listener feedback")
NO = Judgement(False, "truncated start of a turn")
NONE = Judgement()  # no judge configured
FAILED = Judgement(None, error="timeout after 3 retries")


def fn(label: str) -> Judgement:
    return Judgement(label, "prosody")


def test_window_is_the_whole_user_speech_not_the_reference_point():
    assert backchannel.window(ANN) == (1.0, 7.5)


@pytest.mark.parametrize("probe", range(6))
def test_candidate_onset_edges(probe):
    name, t, inside = edge_probes(1.0, 7.5)[probe]
    cand = backchannel.candidate(ANN, timeline(bc(t, t + 0.3)))
    assert (cand is not None) is inside, name


def test_candidate_is_the_first_short_segment_inside_not_the_first_segment():
    tl = timeline(
        bc(0.2, 0.5, 1),  # short, but before the user speaks
        sub(1.5, 3.0, 5),  # first segment inside the window, but substantive
        bc(3.5, 3.8, 3),  # <- the candidate
        bc(5.0, 5.2, 1),  # a later short one
    )
    cand = backchannel.candidate(ANN, tl)
    assert (cand.start, cand.end) == (3.5, 3.8)


def test_three_words_qualify_four_do_not():
    assert backchannel.candidate(ANN, timeline(bc(2.0, 2.5, 3))) is not None
    assert backchannel.candidate(ANN, timeline(sub(2.0, 2.5, 4))) is None


def test_no_candidate_fails_without_asking_any_judge():
    r = backchannel.immediate(ANN, timeline(sub(2.0, 4.0), bc(8.0, 8.2)), "affirmative")
    assert r.verdict is Verdict.FAILURE
    assert "<= 3 words" in r.reason and fmt_window(1.0, 7.5) in r.reason


@pytest.mark.parametrize("condition", CONDITIONS)
def test_stages(condition):
    other = next(c for c in CONDITIONS if c != condition)
    tl = timeline(bc(3.0, 3.4, 2))
    cases = [
        # (genuine, function, verdict, words the reason must contain)
        (None, None, Verdict.NOT_JUDGED, "stage 2"),
        (NONE, fn(condition), Verdict.NOT_JUDGED, "no text judge"),
        (YES, None, Verdict.NOT_JUDGED, "stage 3"),
        (YES, NONE, Verdict.NOT_JUDGED, "no audio judge"),
        (FAILED, None, Verdict.JUDGE_ERROR, "timeout after 3 retries"),
        (YES, FAILED, Verdict.JUDGE_ERROR, "stage 3 (function) judge failed"),
        (NO, fn(condition), Verdict.FAILURE, "not a genuine backchannel"),
        # a genuine NO is a failure whatever stage 3 did (it need not even be asked)
        (NO, FAILED, Verdict.FAILURE, "truncated start of a turn"),
        (NO, None, Verdict.FAILURE, "not a genuine backchannel"),
        (YES, fn(other), Verdict.FAILURE, f"functions as {other}"),
        (YES, fn(condition), Verdict.SUCCESS, f"genuine {condition} backchannel"),
    ]
    for genuine, function, verdict, words in cases:
        r = backchannel.immediate(ANN, tl, condition, genuine, function)
        assert r.verdict is verdict, (genuine, function, r.reason)
        assert words in r.reason
        assert r.onset == 3.0 and r.window == (1.0, 7.5)
        assert r.evidence["candidate"] == {"start": 3.0, "end": 3.4, "text": "alpha bravo"}


def test_function_labels_in_the_papers_spelling():
    tl = timeline(bc(3.0, 3.4))
    r = backchannel.immediate(ANN, tl, "uncertainty", YES, fn(" Uncertain "))
    assert r.success and r.evidence["function"]["value"] == "uncertainty"
    r = backchannel.immediate(ANN, tl, "affirmative", YES, fn("uncertain"))
    assert r.verdict is Verdict.FAILURE


def test_evidence_records_both_judges():
    r = backchannel.immediate(ANN, timeline(bc(3.0, 3.4)), "affirmative", YES, fn("affirmative"))
    assert r.evidence["genuine"] == {"value": True, "reason": "listener feedback"}
    assert r.evidence["function"] == {"value": "affirmative", "reason": "prosody"}


@settings(max_examples=150, deadline=None)
@given(segment_lists((1000, 7500), hi_ms=10_000))
def test_candidate_matches_an_independent_oracle(segments):
    expected = next((s for s in segments
                     if len(s.text.split()) <= 3 and 1000 <= round(s.start * 1000) <= 7500), None)
    assert backchannel.candidate(ANN, timeline(*segments)) == expected
    r = backchannel.immediate(ANN, timeline(*segments), "affirmative")
    assert r.verdict is (Verdict.FAILURE if expected is None else Verdict.NOT_JUDGED)
