"""rules.common conventions (onset inside = both edges inclusive, overlap = positive-length
intersection, float tolerance) and the invariants every rule shares."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.data.timeline import Cue, MissingTranscript, Segment, Span, count_words
from pytest_duplexact.rules import common, ignore, interrupt, recover, stop, take_turn, wait
from tests.rules.helpers import ann, edge_probes, segment_lists, sub, text, word_text
from tests.support.builders import timeline

# --- word counting: the <= 3 / > 3 split -------------------------------------------------------


@pytest.mark.parametrize("n", range(0, 9))
def test_backchannel_is_at_most_three_words(n):
    seg = Segment(0.0, 1.0, text(n))
    assert seg.word_count == n
    assert seg.is_backchannel == (n <= 3)
    assert seg.is_substantive == (n > 3)


@pytest.mark.parametrize("t, n", [
    ("uh-huh.", 1), ("Mm-hmm?", 1), ("I'm not sure", 3), ("U.S. rules, 3.5 times", 4),
    ("okay ' sure", 2),  # a stray quote mark is no word
    ("hmm... right", 2), ("", 0), ("  ", 0), ("— ?", 0),
])
def test_count_words(t, n):
    assert count_words(t) == n


def test_missing_transcript_refuses_to_guess():
    seg = Segment(1.0, 2.0, None)
    with pytest.raises(MissingTranscript, match="1.00-2.00 s has no transcript"):
        seg.is_substantive


@given(word_text())
def test_generated_text_has_its_word_count(t):
    assert 1 <= count_words(t) <= 8
    seg = Segment(0.0, 1.0, t)
    assert seg.is_backchannel != seg.is_substantive


# --- edges -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, t, expected", edge_probes(2.0, 3.5))
def test_inside_is_inclusive_at_both_edges(name, t, expected):
    assert common.inside(t, 2.0, 3.5) is expected
    assert (common.onsets_in([sub(t, t + 1)], 2.0, 3.5) != []) is expected


@pytest.mark.parametrize("seg, expected", [
    ((1.0, 2.0), False),  # ends exactly at lo: touching is not overlap
    ((1.0, 2.001), True),
    ((3.5, 4.0), False),  # starts exactly at hi
    ((3.499, 4.0), True),
    ((2.5, 3.0), True),  # inside
    ((1.0, 5.0), True),  # covers
    ((0.0, 1.999), False),
    ((3.501, 9.0), False),
])
def test_overlap_needs_positive_length_intersection(seg, expected):
    assert (common.overlapping([sub(*seg)], 2.0, 3.5) != []) is expected


def test_float_rounding_does_not_move_an_edge():
    # 1.1 - 0.6 = 0.5000000000000001 and 0.1 + 0.2 = 0.30000000000000004 in binary floats;
    # so is a 0.5 s gap between 16 kHz sample 24048 and sample 32048.
    assert 1.1 - 0.6 > 0.5 and not common.exceeds(1.1 - 0.6, 0.5)
    assert 32048 / 16000 - 24048 / 16000 > 0.5
    assert not common.exceeds(32048 / 16000 - 24048 / 16000, 0.5)
    assert common.exceeds(0.501, 0.5)
    assert common.inside(0.1 + 0.2, 0.0, 0.3)
    assert not common.intersects(0.0, 0.1 + 0.2, 0.3, 1.0)


def test_active_at_is_half_open():
    tl = timeline(sub(1.0, 2.0), sub(3.0, 4.0))
    assert common.active_at(tl, 1.0).start == 1.0  # starting exactly now: speaking
    assert common.active_at(tl, 1.999).start == 1.0
    assert common.active_at(tl, 2.0) is None  # ended exactly now: silent
    assert common.active_at(tl, 2.5) is None


def test_silence_gaps_include_leading_and_trailing():
    speech = (Span(0.0, 1.5), Span(2.0, 2.5), Span(2.4, 3.0), Span(9.0, 10.0))
    gaps = common.silence_gaps(speech, 1.0, 4.0)
    assert [(g.start, g.end) for g in gaps] == [(1.5, 2.0), (3.0, 4.0)]
    assert [(g.start, g.end) for g in common.silence_gaps(speech, 5.0, 6.0)] == [(5.0, 6.0)]
    assert [(g.start, g.end) for g in common.silence_gaps(speech, 0.5, 1.0)] == []
    lead = common.silence_gaps((Span(1.5, 5.0),), 1.0, 4.0)
    assert [(g.start, g.end) for g in lead] == [(1.0, 1.5)]


def test_speech_overlaps_uses_raw_speech_when_present():
    tl = timeline(sub(0.0, 4.0), speech=[(0.0, 1.0), (3.0, 4.0)])
    assert not common.speech_overlaps(tl, Span(1.0, 3.0))  # the merged segment would say yes
    assert common.speech_overlaps(timeline(sub(0.0, 4.0)), Span(1.0, 3.0))


def test_list_segments_is_readable_and_bounded():
    segs = [sub(float(i), i + 0.5) for i in range(6)]
    out = common.list_segments(segs)
    assert out.startswith("0.00-0.50 s 'alpha bravo charlie delta'")
    assert out.endswith("(+2 more)")


# --- invariants shared by the segment rules ------------------------------------------------------

# One instance's worth of annotations used by every rule below, in ms for the strategies.
ANN = ann(user_start=1.0, user_end=9.0, pause_start=3.0, pause_end=3.8, other_start=4.0,
          other_end=6.0, interrupt_target=5.0)
CUE = Cue(5.0, 7.0)
SPEECH = [(0.5, 12.5)]  # raw speech fixed so the cue always overlaps it: never EXCLUDED
EDGES = (1000, 9000, 3000, 3800, 4000, 6000, 8000, 9500, 12000, 5000, 7000, 3000)


def verdicts(segments) -> dict[str, Verdict]:
    tl = timeline(*segments, speech=SPEECH, cue=CUE)
    out = {}
    for c in taxonomy.conditions_of("wait"):
        out[c.key] = wait.immediate(ANN, tl, c.id).verdict
    out["ignore"] = ignore.immediate(ANN, tl).verdict
    for c in taxonomy.conditions_of("take_turn"):
        out[c.key] = take_turn.immediate(ANN, tl, c.id).verdict
    out["interrupt"] = interrupt.immediate(ANN, tl).verdict
    out["recover"] = recover.immediate(ANN, tl).verdict
    return out


NEGATIVE = ("wait", "ignore")  # success = no substantive speech in the window


@settings(max_examples=150, deadline=None)
@given(segment_lists(EDGES, hi_ms=15_000, max_words=3))
def test_short_segments_are_never_substantive_anywhere(segments):
    for key, v in verdicts(segments).items():
        expected = Verdict.SUCCESS if key.split(".")[0] in NEGATIVE else Verdict.FAILURE
        assert v is expected, key


@settings(max_examples=150, deadline=None)
@given(segment_lists(EDGES, hi_ms=15_000),
       st.integers(0, 15_000), st.integers(1, 3000), st.integers(1, 3))
def test_adding_a_backchannel_changes_no_verdict(segments, start_ms, dur_ms, words):
    extra = Segment(start_ms / 1000, (start_ms + dur_ms) / 1000, text(words))
    assert verdicts(segments + [extra]) == verdicts(segments)


@settings(max_examples=60, deadline=None)
@given(segment_lists(EDGES, hi_ms=15_000))
def test_rules_are_deterministic_and_order_free(segments):
    assert verdicts(segments) == verdicts(list(reversed(segments)))
    tl = timeline(*segments, speech=SPEECH, cue=CUE)
    assert wait.immediate(ANN, tl, "continuous_speech") == \
        wait.immediate(ANN, tl, "continuous_speech")
    assert recover.immediate(ANN, tl) == recover.immediate(ANN, tl)


@settings(max_examples=100, deadline=None)
@given(segment_lists((5000, 6000, 7000), lo_ms=5001, hi_ms=15_000, max_words=3))
def test_backchannels_never_break_a_yield(later):
    # The model stops at 5.5 s during a 5.0-7.0 s intervention; short segments afterwards are
    # backchannels, never a reclaimed floor.
    tl = timeline(sub(2.0, 5.5), *[s for s in later if s.start >= 5.5], cue=CUE, duration=20.0)
    assert stop.immediate(ANN, tl).success
    assert stop.subsequent(tl, stop.immediate(ANN, tl)).verdict is Verdict.SUCCESS


def test_fmt_near_adds_digits_only_where_two_would_read_as_an_edge():
    fmt_near = common.fmt_near
    assert fmt_near(0.502, -1.0, 0.5, sign="+") == "+0.502"
    assert fmt_near(0.4996, 0.5) == "0.4996"
    assert fmt_near(0.5, 0.5) == "0.50"  # on the edge is on the edge
    assert fmt_near(0.37, 0.5) == "0.37"
    assert fmt_near(8.0600004, 8.06) == "8.06"  # within float rounding of the edge
