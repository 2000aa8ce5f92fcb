"""rules/borderline.py: a counted immediate verdict is borderline when an edge moved by
BORDERLINE_EDGE_S, or a 3- or 4-word segment read with one word more or fewer, flips it.
Instances built to sit on each edge, and properties at the window edges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import Verdict, flip_text
from pytest_duplexact.data.taxonomy import BORDERLINE_EDGE_S
from pytest_duplexact.rules import RULES, Trial
from pytest_duplexact.rules.backchannel import Judgement
from pytest_duplexact.rules.borderline import flips
from pytest_duplexact.rules.scoring import score
from tests.rules.helpers import MS, bc, instants, segment_lists, sub
from tests.rules.test_scoring import instance
from tests.support.builders import seg, timeline

DELTA_MS = round(BORDERLINE_EDGE_S * MS)


def test_the_edge_error_is_the_documented_100_ms():
    assert BORDERLINE_EDGE_S == 0.10


def take_turn_at(onset: float, condition: str = "immediate", words: int = 5):
    inst = instance("take_turn", condition, user_start=0.0, user_end=5.0)
    return score(inst, timeline(sub(onset, onset + 1.5, words), duration=20.0)).immediate


def test_an_onset_50_ms_inside_take_turns_window_is_borderline():
    imm = take_turn_at(5.45)  # window [5.0, 5.5]
    assert imm.verdict is Verdict.SUCCESS and imm.is_borderline
    (flip,) = imm.borderline
    assert flip["edge"] == "onset" and flip["at"] == 5.45 and flip["segment"] == 0
    assert flip["shift"] == BORDERLINE_EDGE_S and flip["verdict"] == "failure"
    assert flip_text(flip) == "onset at 5.45 s moved +0.10 s -> failure"


def test_an_onset_1_s_inside_the_window_is_not_borderline():
    imm = take_turn_at(6.0, "delayed")  # window [5.0, 8.0]
    assert imm.verdict is Verdict.SUCCESS and imm.borderline == ()


def test_an_onset_50_ms_outside_the_window_is_a_borderline_failure():
    imm = take_turn_at(4.95)
    assert imm.verdict is Verdict.FAILURE
    assert [(f["edge"], f["shift"]) for f in imm.borderline] == [("onset", BORDERLINE_EDGE_S)]


def test_a_4_word_segment_is_borderline_at_the_3_word_line_and_5_words_are_not():
    imm = take_turn_at(5.2, words=4)
    assert imm.verdict is Verdict.SUCCESS
    (flip,) = imm.borderline  # 0.3 s from either edge: only the word count flips it
    assert (flip["edge"], flip["shift"], flip["words"]) == ("words", -1, 4)
    assert flip_text(flip) == "segment 0 (5.20 s) read as 3 words instead of 4 -> failure"
    assert take_turn_at(5.2, words=5).borderline == ()


def test_a_3_word_segment_in_the_window_is_a_borderline_failure():
    imm = take_turn_at(5.2, words=3)
    assert imm.verdict is Verdict.FAILURE
    assert [(f["edge"], f["shift"]) for f in imm.borderline] == [("words", 1)]


def hold_floor(gap: float):
    inst = instance("hold_floor", "continue")
    tl = timeline(sub(8.0, 10.8, 6), sub(10.8 + gap, 14.0, 6), cue=(10.0, 11.0),
                  duration=20.0)
    return score(inst, tl).immediate


def test_a_hold_floor_gap_of_0_45_s_is_borderline_and_of_0_2_s_is_not():
    imm = hold_floor(0.45)
    assert imm.verdict is Verdict.SUCCESS
    assert {(f["edge"], f["shift"]) for f in imm.borderline} == {
        ("offset", -BORDERLINE_EDGE_S), ("onset", BORDERLINE_EDGE_S)}
    assert hold_floor(0.2).borderline == ()


def test_a_hold_floor_gap_of_0_55_s_is_a_borderline_failure_and_0_75_s_is_not():
    imm = hold_floor(0.55)
    assert imm.verdict is Verdict.FAILURE and imm.is_borderline
    assert hold_floor(0.75).verdict is Verdict.FAILURE and hold_floor(0.75).borderline == ()


def test_raw_speech_edges_move_with_the_segments_they_bound():
    """A pause inside one merged segment lives in the raw spans only: it is moved too."""
    inst = instance("hold_floor", "continue")
    tl = timeline(sub(8.0, 14.0, 6), speech=[(8.0, 10.8), (11.25, 14.0)], cue=(10.0, 11.0),
                  duration=20.0)
    imm = score(inst, tl).immediate
    assert imm.verdict is Verdict.SUCCESS
    assert {(f["at"], f["segment"]) for f in imm.borderline} == {(10.8, None), (11.25, None)}


def test_wait_with_speech_ending_50_ms_before_the_pause_is_borderline():
    inst = instance("wait", "inter_sentential_pause", user_start=0.0, user_end=6.0,
                    pause_start=3.0, pause_end=4.0)
    near = score(inst, timeline(sub(1.0, 2.95), duration=20.0)).immediate
    assert near.verdict is Verdict.SUCCESS
    assert [(f["edge"], f["shift"]) for f in near.borderline] == [("offset", BORDERLINE_EDGE_S)]
    far = score(inst, timeline(sub(1.0, 2.0), duration=20.0)).immediate
    assert far.verdict is Verdict.SUCCESS and far.borderline == ()


class Judges:
    """Backchannel answers, counted: the perturbed evaluations must not ask again."""

    def __init__(self):
        self.asked = 0

    def missing_text_judge(self):
        return "none"

    def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
        self.asked += 1
        return Judgement(True, "yes"), Judgement("affirmative", "nods")


def backchannel(onset: float, words: int):
    inst = instance("backchannel", "affirmative", user_start=0.0, user_end=6.0,
                    backchannel_point=3.0)
    judges = Judges()
    imm = score(inst, timeline(bc(onset, onset + 0.5, words), duration=20.0), judges).immediate
    return imm, judges.asked


def test_a_3_word_backchannel_is_borderline_and_the_judges_are_asked_once():
    imm, asked = backchannel(3.0, 3)
    assert imm.verdict is Verdict.SUCCESS and asked == 1
    assert [(f["edge"], f["verdict"]) for f in imm.borderline] == [("words", "failure")]


def test_a_2_word_backchannel_well_inside_the_user_speech_is_not_borderline():
    imm, asked = backchannel(3.0, 2)
    assert imm.verdict is Verdict.SUCCESS and imm.borderline == () and asked == 1


def test_a_candidate_that_would_become_another_segment_is_borderline_not_judged():
    """The first candidate's onset 50 ms before the user starts: moved later it is the
    candidate, and nobody judged it."""
    inst = instance("backchannel", "affirmative", user_start=1.0, user_end=6.0,
                    backchannel_point=3.0)
    tl = timeline(bc(0.95, 1.2, 2), bc(3.0, 3.4, 2), duration=20.0)
    imm = score(inst, tl, Judges()).immediate
    assert imm.verdict is Verdict.SUCCESS
    assert ("onset", 0.95, "not_judged") in {(f["edge"], f["at"], f["verdict"])
                                             for f in imm.borderline}


def test_uncounted_verdicts_carry_no_borderline():
    inst = instance("hold_floor", "continue")
    imm = score(inst, timeline(sub(12.0, 14.0), cue=(10.0, 11.0), duration=20.0)).immediate
    assert imm.verdict is Verdict.EXCLUDED and imm.borderline is None
    assert "borderline" not in imm.to_dict()


# --- properties at the window edges ----------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(onset_ms=instants((5000, 5500, 5000 - DELTA_MS, 5500 + DELTA_MS, 5000 + DELTA_MS,
                          5500 - DELTA_MS), 1000, 9000))
def test_take_turn_is_borderline_exactly_when_delta_crosses_a_window_edge(onset_ms):
    def inside(ms):
        return 5000 <= ms <= 5500

    imm = take_turn_at(onset_ms / MS)
    expect = inside(onset_ms - DELTA_MS) != inside(onset_ms) or \
        inside(onset_ms + DELTA_MS) != inside(onset_ms)
    assert imm.is_borderline == expect, (onset_ms, imm.borderline)


@settings(max_examples=150, deadline=None)
@given(gap_ms=instants((400, 500, 600), 150, 850))
def test_hold_floor_is_borderline_exactly_when_delta_crosses_the_gap_limit(gap_ms):
    imm = hold_floor(gap_ms / MS)
    expect = (gap_ms > 500) != (gap_ms - DELTA_MS > 500) or \
        (gap_ms > 500) != (gap_ms + DELTA_MS > 500)
    assert imm.is_borderline == expect, (gap_ms, imm.borderline)


@settings(max_examples=150, deadline=None)
@given(end_ms=instants((3000, 3000 - DELTA_MS, 3000 + DELTA_MS), 1500, 3900))
def test_wait_is_borderline_exactly_when_delta_crosses_into_the_pause(end_ms):
    """Speech ending at end_ms against the pause [3.0, 4.0]: touching its start is no
    overlap, so the verdict flips exactly when a 100 ms move crosses that instant."""
    inst = instance("wait", "inter_sentential_pause", user_start=0.0, user_end=6.0,
                    pause_start=3.0, pause_end=4.0)
    imm = score(inst, timeline(sub(1.0, end_ms / MS, 6), duration=20.0)).immediate

    def overlaps(ms):
        return ms > 3000

    expect = overlaps(end_ms - DELTA_MS) != overlaps(end_ms) or \
        overlaps(end_ms + DELTA_MS) != overlaps(end_ms)
    assert imm.verdict.value == ("failure" if overlaps(end_ms) else "success")
    assert imm.is_borderline == expect, (end_ms, imm.borderline)


@settings(max_examples=100, deadline=None)
@given(segs=segment_lists((3000, 4000, 2900, 4100), 0, 9000, max_words=6),
       action=st.sampled_from([("wait", "inter_sentential_pause"), ("take_turn", "delayed"),
                               ("interrupt", "help")]))
def test_every_flip_is_a_perturbation_that_changes_the_verdict(segs, action):
    """Any timeline: borderline is () or flips, each naming a perturbation whose verdict
    differs; uncounted verdicts carry None; the original verdict is the rule's."""
    inst = instance(*action, user_start=0.0, user_end=4.0, pause_start=3.0, pause_end=4.0,
                    interrupt_target=1.0)
    tl = timeline(*segs, duration=20.0)
    imm = score(inst, tl).immediate
    plain = RULES[inst.action].immediate(Trial(inst, tl), None)
    assert imm.verdict is plain.verdict
    if not imm.verdict.counted:
        assert imm.borderline is None
        return
    assert all(f["verdict"] != imm.verdict.value for f in imm.borderline)
    assert imm.borderline == flips(RULES[inst.action], Trial(inst, tl), plain)
    far = all(abs(s.start - e) > 0.2 and abs(s.end - e) > 0.2 and s.word_count not in (3, 4)
              for s in segs for e in (0.0, 3.0, 4.0))
    if far:  # no edge within reach of a window edge and no word count at the line
        assert imm.borderline == ()


def test_a_segment_without_text_moved_into_play_is_skipped_not_raised():
    inst = instance("backchannel", "affirmative", user_start=1.0, user_end=6.0,
                    backchannel_point=3.0)
    tl = timeline(seg(0.95, 1.2, None), bc(3.0, 3.4, 2), duration=20.0)
    # the rule never reads the text-less segment outside the window; moved in, no verdict
    imm = score(inst, tl, Judges()).immediate
    assert imm.verdict is Verdict.SUCCESS
    assert 0.95 not in {f["at"] for f in imm.borderline}
