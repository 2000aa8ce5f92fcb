"""Recording -> Timeline (pytest_duplexact/listen/segmentation.py): merging, transcript assignment,
transcript sources, and one end-to-end run on espeak-ng speech."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.timeline import EPS, Cue, MissingTranscript, Span, Word
from pytest_duplexact.listen import segmentation as seg
from pytest_duplexact.pipelines.duplex import Recording
from tests.listen.test_vad import PHRASES, SR, TOL_S, needs_espeak, place, speak

# -- merge_spans ------------------------------------------------------------------------------

def test_a_gap_shorter_than_merge_gap_joins_one_equal_to_it_splits():
    # binary fractions, so the gap arithmetic is exact
    assert seg.merge_spans([Span(1.0, 1.5), Span(1.75, 2.0)], 0.25) == [Span(1.0, 1.5),
                                                                         Span(1.75, 2.0)]
    assert seg.merge_spans([Span(1.0, 1.5), Span(1.7421875, 2.0)], 0.25) == [Span(1.0, 2.0)]


@settings(max_examples=300, deadline=None)
@given(end=st.integers(0, 60 * SR), gap_ms=st.sampled_from([0, 100, 250, 300, 500]),
       extra=st.sampled_from([-1, 0, 1]))
def test_a_gap_of_exactly_merge_gap_in_samples_splits_whatever_its_float_rounding(
        end, gap_ms, extra):
    """Edges come from sample counts: a pause of exactly merge_gap is a few ulps short in
    seconds for some positions (1.386 - 1.086 < 0.3); one sample less is merged, one more is
    not (a stress run's hypothesis example closed a pause silero kept this way)."""
    gap = gap_ms * SR // 1000 + extra
    if gap < 1:
        return
    a, b = Span(end / SR - 0.5, end / SR), Span((end + gap) / SR, (end + gap) / SR + 0.5)
    merged = seg.merge_spans([a, b], gap_ms / 1000)
    assert merged == ([a, b] if extra >= 0 else [Span(a.start, b.end)])


def test_merging_chains_through_several_short_gaps_and_absorbs_overlaps():
    spans = [Span(3.0, 4.0), Span(0.0, 1.0), Span(1.1, 2.0), Span(2.2, 2.5), Span(0.5, 0.8)]
    assert seg.merge_spans(spans, 0.3) == [Span(0.0, 2.5), Span(3.0, 4.0)]


def test_merge_gap_zero_only_joins_touching_or_overlapping_spans():
    assert seg.merge_spans([Span(0, 1), Span(1, 2), Span(1.5, 3), Span(3.5, 4)], 0.0) == \
        [Span(0, 3), Span(3.5, 4)]
    with pytest.raises(ValueError, match="merge_gap"):
        seg.merge_spans([], -0.1)


span_lists = st.lists(
    st.tuples(st.floats(0, 60, allow_nan=False), st.floats(0, 5, allow_nan=False))
    .map(lambda t: Span(t[0], t[0] + t[1])), max_size=25)


@settings(max_examples=200, deadline=None)
@given(spans=span_lists, gap=st.floats(0, 2, allow_nan=False))
def test_merged_segments_are_disjoint_and_hold_every_raw_span_exactly_once(spans, gap):
    merged = seg.merge_spans(spans, gap)
    for a, b in zip(merged, merged[1:]):
        assert b.start - a.end >= gap - EPS and b.start > a.end
    for sp in spans:
        holders = [m for m in merged if m.start <= sp.start and sp.end <= m.end]
        assert len(holders) == 1
    # nothing invented: every segment edge is a raw edge
    assert {m.start for m in merged} <= {s.start for s in spans}
    assert {m.end for m in merged} <= {s.end for s in spans}
    assert seg.merge_spans(merged, gap) == merged


# -- assign_words -----------------------------------------------------------------------------

SEGS = [Span(1.0, 2.0), Span(3.0, 4.0)]


def w(a, b, text="x"):
    return Word(a, b, text)


def test_a_word_goes_to_the_segment_holding_its_midpoint():
    runs_past = w(1.7, 2.2, "runs")  # midpoint 1.95: inside the first, though it ends after it
    mostly_out = w(1.9, 3.5, "long")  # midpoint 2.7: in neither; 0.3 s from the second
    got = seg.assign_words(SEGS, [w(1.1, 1.3, "a"), runs_past, mostly_out, w(3.5, 3.9, "b")])
    assert [[x.text for x in ws] for ws in got.words] == [["a", "runs"], ["long", "b"]]
    assert got.unaligned == ()


def test_a_word_outside_every_segment_joins_the_nearest_within_tolerance():
    got = seg.assign_words(SEGS, [w(2.3, 2.5, "near1"), w(2.6, 2.8, "near2")], tolerance=0.5)
    assert [[x.text for x in ws] for ws in got.words] == [["near1"], ["near2"]]


def test_words_beyond_the_tolerance_are_unaligned_not_dropped():
    words = [w(0.0, 0.2, "early"), w(2.3, 2.5, "gap"), w(5.0, 5.5, "late")]
    got = seg.assign_words(SEGS, words, tolerance=0.45)  # "gap" is 0.4 s after the first
    assert [[x.text for x in ws] for ws in got.words] == [["gap"], []]
    assert [x.text for x in got.unaligned] == ["early", "late"]
    assert seg.assign_words([], words).unaligned == tuple(words)


def test_an_equidistant_word_goes_to_the_earlier_segment():
    got = seg.assign_words(SEGS, [w(2.4, 2.6, "mid")], tolerance=1.0)
    assert [len(ws) for ws in got.words] == [1, 0]


def test_texts_join_words_in_time_order():
    got = seg.assign_words([Span(0, 3)], [w(1.0, 1.5, "world."), w(0.1, 0.5, " Hello")])
    assert got.texts() == ["Hello world."]


def test_assignment_rejects_unsorted_segments_and_negative_tolerance():
    with pytest.raises(ValueError, match="sorted"):
        seg.assign_words(SEGS[::-1], [])
    with pytest.raises(ValueError, match="tolerance"):
        seg.assign_words(SEGS, [], tolerance=-1)


word_lists = st.lists(st.tuples(st.floats(0, 30, allow_nan=False), st.floats(0, 2))
                      .map(lambda t: Word(t[0], t[0] + t[1], "w")), max_size=30)


@settings(max_examples=200, deadline=None)
@given(spans=span_lists, words=word_lists, gap=st.floats(0.01, 1), tol=st.floats(0, 1))
def test_every_word_lands_exactly_once_and_never_far_from_its_segment(spans, words, gap, tol):
    segs = seg.merge_spans(spans, gap)
    got = seg.assign_words(segs, words, tol)
    assert len(got.words) == len(segs)
    assert sum(map(len, got.words)) + len(got.unaligned) == len(words)
    for s, ws in zip(segs, got.words):
        for x in ws:
            mid = (x.start + x.end) / 2
            assert s.start - tol <= mid <= s.end + tol
    for x in got.unaligned:  # unaligned only when no segment is within the tolerance
        mid = (x.start + x.end) / 2
        assert all(mid < s.start - tol or mid > s.end + tol for s in segs)
    for x in words:  # a midpoint inside a segment always goes to that segment
        mid = (x.start + x.end) / 2
        holder = [k for k, s in enumerate(segs) if s.start <= mid <= s.end]
        if holder:
            assert any(x is y for y in got.words[holder[0]])


# -- build_timeline ---------------------------------------------------------------------------

RAW = [Span(0.5, 1.0), Span(1.2, 1.6), Span(3.0, 4.0)]  # the first two merge at 0.3 s


@pytest.fixture
def fixed_vad(monkeypatch):
    """build_timeline's logic without the network: the VAD returns RAW."""
    monkeypatch.setattr(seg.vad, "speech_spans", lambda samples, rate, params=None: list(RAW))


def recording(**kw):
    out = np.zeros(5 * SR, np.float32)
    return Recording(input=np.zeros(4 * SR, np.float32), output=out, **kw)


def test_without_a_transcript_source_segments_have_no_text_and_rules_refuse(fixed_vad):
    tl = seg.build_timeline(recording())
    assert [(s.start, s.end, s.text) for s in tl.segments] == [(0.5, 1.6, None),
                                                               (3.0, 4.0, None)]
    with pytest.raises(MissingTranscript, match="no transcript"):
        tl.segments[0].is_backchannel


def test_the_recording_context_is_carried_over(fixed_vad):
    cue = Cue(2.0, 2.8, forced=True)
    rec = recording(cue=cue, user_sent_until=3.5, events=[(0.25, "cue injected")])
    tl = seg.build_timeline(rec)
    assert tl.speech == tuple(RAW)
    assert tl.cue == cue and tl.user_sent_until == 3.5
    assert tl.events == ((0.25, "cue injected"),)
    assert tl.duration == 5.0


def test_native_transcript_words_give_the_text(fixed_vad):
    words = (w(0.6, 0.9, "Yeah,"), w(1.25, 1.5, "sure."), w(3.1, 3.3, "So"),
             w(3.3, 3.6, "the"), w(3.6, 3.9, "plan"), w(3.9, 4.2, "is"), w(9.0, 9.3, "ghost"))
    tl = seg.build_timeline(recording(transcript=words), transcriber=_Exploding())
    assert [s.text for s in tl.segments] == ["Yeah, sure.", "So the plan is"]
    assert tl.segments[0].is_backchannel and tl.segments[1].is_substantive
    assert [x.text for x in tl.unaligned] == ["ghost"]


def test_a_segment_the_native_transcript_says_nothing_about_has_zero_words(fixed_vad):
    tl = seg.build_timeline(recording(transcript=(w(3.1, 3.5, "Okay."),)))
    assert [s.text for s in tl.segments] == ["", "Okay."]
    assert tl.segments[0].word_count == 0


class _Exploding:
    name = "exploding"

    def transcribe(self, audio, sample_rate):
        raise AssertionError("the native transcript must win over the transcriber")


class _Recorder:
    """Answers two words per clip, remembering each clip's length."""

    name = "recorder"

    def __init__(self):
        self.lengths = []

    def transcribe(self, audio, sample_rate):
        self.lengths.append(len(audio) / sample_rate)
        d = len(audio) / sample_rate
        return (Word(0.1, d / 2, "hello"), Word(d / 2, d - 0.1, "there"))


def test_the_transcriber_hears_each_segment_padded_and_its_words_land_on_the_timeline(
        fixed_vad):
    rec = _Recorder()
    tl = seg.build_timeline(recording(), transcriber=rec)
    pad = seg.TRANSCRIBE_PAD_S
    assert rec.lengths == pytest.approx([1.1 + 2 * pad, 1.0 + 2 * pad], abs=1 / SR)
    assert [s.text for s in tl.segments] == ["hello there", "hello there"]
    assert tl.unaligned == ()


def test_the_transcriber_pad_never_reaches_the_neighbouring_segment(fixed_vad):
    rec = _Recorder()
    seg.build_timeline(recording(), transcriber=rec, merge_gap=0.1)  # no merge: 3 segments
    assert rec.lengths[0] == pytest.approx(0.5 + 2 * 0.05, abs=1 / SR)  # pad = merge_gap / 2


@needs_espeak
def test_end_to_end_on_speech_with_a_native_transcript():
    """Real VAD on a model track: a backchannel, then an answer after a 0.6 s pause whose two
    sentences are 0.2 s apart (one segment); the transcript's words find their segments."""
    yeah, a, b = speak("Yeah.", "en-us", 175), speak(*PHRASES[0]), speak(*PHRASES[2])
    out, truth = place([1.0, yeah, 0.6, a, 0.2, b, 1.5])
    words = tuple(Word(s, e, t) for (s, e), t in zip(truth, ["Yeah.", PHRASES[0][0],
                                                             PHRASES[2][0]]))
    tl = seg.build_timeline(Recording(input=np.zeros(SR, np.float32), output=out,
                                      transcript=words))
    assert len(tl.segments) == 2
    first, second = tl.segments
    assert abs(first.start - truth[0][0]) <= TOL_S and abs(first.end - truth[0][1]) <= TOL_S
    assert abs(second.start - truth[1][0]) <= TOL_S and abs(second.end - truth[2][1]) <= TOL_S
    assert first.text == "Yeah." and first.is_backchannel
    assert second.word_count == 6 + 8 and second.is_substantive
    assert tl.duration == pytest.approx(len(out) / SR)
