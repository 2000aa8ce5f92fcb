"""The judge prompt fields each action's rule builds (rules/<action>.py, judge_fields) on
hand-made trials."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.timeline import Cue, MissingTranscript, Word
from pytest_duplexact.judges import JudgePanel, prompts
from pytest_duplexact.rules import RULES, Trial, backchannel
from pytest_duplexact.rules.action_rule import Rule
from pytest_duplexact.rules.speech import JudgeInputError, split_segment
from tests.judges.judgekit import BERLIN, TABLE_WORDS, judged_instance
from tests.support.builders import seg, timeline, words


def fields(inst, tl) -> dict[str, str]:
    """The rule's prompt fields, given its own immediate result (no judges)."""
    rule, trial = RULES[inst.action], Trial(inst, tl)
    return rule.judge_fields(trial, rule.immediate(trial, JudgePanel()))


def test_every_judged_action_has_a_builder_and_a_prompt_with_the_same_fields():
    judged = {a for a, r in RULES.items() if type(r).judge_fields is not Rule.judge_fields}
    assert judged == set(prompts.SUBSEQUENT) == set(taxonomy.ACTIONS) - {"stop"}


def test_wait_pause_uses_speech_after_the_pause_start_and_the_later_response():
    inst = judged_instance("wait", "inter_sentential_pause", user_words=TABLE_WORDS,
                         texts={"user": "I need a table. For four people tonight."},
                         user_start=0.0, user_end=3.3, pause_start=1.2, pause_end=1.8)
    tl = timeline(seg(1.3, 1.5, "mm-hmm"), seg(3.6, 6.0, "Sure, a table for four tonight."),
                  seg(7.0, 8.0, "Anything else?"))
    f = fields(inst, tl)
    cond = taxonomy.condition("wait", "inter_sentential_pause")
    assert f == {"condition_id": "inter_sentential_pause",
                 "condition_context": cond.judge_context,
                 "user_during_or_after_wait": "For four people tonight.",
                 "model_response": "Sure, a table for four tonight. Anything else?"}


def test_wait_continuous_speech_is_the_whole_turn_under_the_papers_key():
    inst = judged_instance("wait", "continuous_speech", user_words=TABLE_WORDS,
                         texts={"user": "ignored when words exist"},
                         user_start=0.0, user_end=3.3)
    tl = timeline(seg(2.0, 2.3, "yeah"), seg(3.5, 5.0, "Booked for four tonight."))
    f = fields(inst, tl)
    assert f["condition_id"] == "no_pause"
    assert f["condition_context"] == taxonomy.condition("wait", "continuous_speech").judge_context
    assert f["user_during_or_after_wait"] == "I need a table. For four people tonight."
    assert f["model_response"] == "Booked for four tonight."


def test_wait_pause_without_timed_user_words_is_a_clear_dataset_error():
    inst = judged_instance("wait", "intra_sentential_pause", texts={"user": "I need a table."},
                         user_start=0.0, user_end=3.3, pause_start=1.2, pause_end=1.8)
    with pytest.raises(JudgeInputError) as e:
        fields(inst, timeline(seg(4.0, 5.0, "Sure thing, four people.")))
    msg = str(e.value)
    assert "instances.jsonl:7" in msg and "wait-intra_sentential_pause-1" in msg
    assert "audio.user.transcript" in msg


def test_take_turn_response_starts_at_the_qualifying_onset():
    inst = judged_instance("take_turn", "immediate", user_words=TABLE_WORDS,
                         user_start=0.0, user_end=3.3)
    tl = timeline(seg(1.0, 1.2, "uh"), seg(3.4, 5.0, "Yes, for four people tonight."),
                  seg(6.0, 7.0, "At what time?"))
    f = fields(inst, tl)
    assert f == {"condition_id": "immediate",
                 "user_speech": "I need a table. For four people tonight.",
                 "model_response": "Yes, for four people tonight. At what time?"}


def test_take_turn_without_words_falls_back_to_the_user_text():
    inst = judged_instance("take_turn", "delayed", texts={"user": "Book me a table."},
                         user_start=0.0, user_end=3.3)
    tl = timeline(seg(4.0, 5.0, "Sure, for how many people?"))
    assert fields(inst, tl)["user_speech"] == "Book me a table."


IGNORE_WORDS = words(("What", 0.0, 0.3), ("time", 0.4, 0.7), ("honey", 0.9, 1.1),
                     ("grab", 1.2, 1.4), ("the", 1.45, 1.5), ("keys", 1.55, 1.8),
                     ("does", 2.0, 2.2), ("the", 2.3, 2.4), ("bank", 2.5, 2.7),
                     ("close?", 2.8, 3.1))


def test_ignore_separates_addressed_and_ignored_speech_and_cuts_model_speech_at_its_end():
    inst = judged_instance("ignore", "other_directed_speech", user_words=IGNORE_WORDS,
                         texts={"user": "x", "ignored": "honey grab the keys"},
                         user_start=0.0, user_end=3.1, other_start=0.85, other_end=1.85)
    tl = timeline(seg(1.0, 1.2, "okay"), seg(1.6, 2.6, "so the bank"),
                  seg(3.5, 5.0, "The bank closes at five."))
    f = fields(inst, tl)
    assert f["addressed_user_speech"] == "What time does the bank close?"
    assert f["ignored_speech"] == "honey grab the keys"
    # "so the bank" straddles 1.85 s: 0.25 of 1.0 s -> 1 of 3 words before the end
    assert f["model_response"] == "the bank The bank closes at five."
    # with its timed words the segment is cut where they say: "so" starts before 1.85 s
    native = (Word(1.6, 1.9, "so"), Word(1.95, 2.2, "the"), Word(2.25, 2.6, "bank"))
    timed = timeline(seg(1.0, 1.2, "okay"), replace(seg(1.6, 2.6, "so the bank"), words=native),
                     seg(3.5, 5.0, "The bank closes at five."))
    assert fields(inst, timed)["model_response"] == "the bank The bank closes at five."


def test_ignore_without_words_removes_the_ignored_text_from_the_user_text():
    inst = judged_instance("ignore", "background_speech",
                         texts={"user": "What time honey grab the keys does the bank close?",
                                "ignored": "honey grab the keys"},
                         user_start=0.0, user_end=3.1, other_start=0.85, other_end=1.85)
    f = fields(inst, timeline(seg(3.5, 5.0, "It closes at five.")))
    assert f["addressed_user_speech"] == "What time does the bank close?"


def test_backchannel_subsequent_fields_around_the_candidate():
    inst = judged_instance("backchannel", "affirmative", user_words=BERLIN,
                         user_start=0.0, user_end=4.0, backchannel_point=1.6)
    tl = timeline(seg(1.5, 1.8, "mm-hmm"), seg(3.0, 3.2, "yeah"),
                  seg(4.3, 6.0, "That sounds like a great move."))
    f = fields(inst, tl)
    assert f == {"user_before_and_overlap": "So I moved to Berlin",
                 "user_between": "last year and love it.",
                 "model_backchannel": "mm-hmm",
                 "model_later": "yeah That sounds like a great move."}


def test_backchannel_between_runs_to_the_end_when_the_model_never_goes_substantive():
    inst = judged_instance("backchannel", "uncertainty", user_words=BERLIN,
                         user_start=0.0, user_end=4.0, backchannel_point=1.6)
    tl = timeline(seg(1.5, 1.8, "hmm?"), seg(3.0, 3.2, "right"))
    f = fields(inst, tl)
    assert f["user_between"] == "last year"  # until the first later segment, "right" at 3.0
    assert f["model_later"] == "right"


def test_backchannel_genuine_fields_show_the_next_speech_and_the_gap():
    inst = judged_instance("backchannel", "affirmative", user_words=BERLIN,
                         user_start=0.0, user_end=4.0, backchannel_point=1.6)
    cand = seg(1.5, 1.8, "So the")
    tl = timeline(cand, seg(2.05, 4.0, "reason people move there is rent."))
    assert backchannel.genuine_fields(inst, tl, cand) == {
        "user_before_and_overlap": "So I moved to Berlin", "candidate": "So the",
        "model_next": "reason people move there is rent.", "gap_to_next": "0.25 s"}
    alone = backchannel.genuine_fields(inst, timeline(cand), cand)
    assert alone["model_next"] == "" and alone["gap_to_next"] == ""


def test_hold_floor_splits_at_the_timeline_cue_not_the_cue_clip_clock():
    inst = judged_instance("hold_floor", "shorten", texts={"cue": "Keep it short please."},
                         cue_start=0.2, cue_end=1.2)  # cue clip clock: must not be used
    tl = timeline(seg(0.5, 3.5, "The first step is to preheat the oven"),
                  seg(3.6, 6.0, "then mix the flour and sugar together"),
                  cue=Cue(3.0, 4.0))
    f = fields(inst, tl)
    cond = taxonomy.condition("hold_floor", "shorten")
    # 0.4 of the 2.4 s segment is before 4.0 s: 1 of its 7 words
    assert f == {"condition_id": cond.judge_key, "required_adjustment": cond.judge_context,
                 "cue": "Keep it short please.",
                 "model_through_cue": "The first step is to preheat the oven then",
                 "model_after_cue": "mix the flour and sugar together"}


def test_interrupt_user_speech_is_what_was_streamed():
    user = words(("I'm", 0.0, 0.3), ("mixing", 0.4, 0.8), ("bleach", 0.9, 1.3), ("with", 1.4, 1.6),
                 ("ammonia", 1.7, 2.2), ("to", 2.6, 2.7), ("clean", 2.8, 3.2))
    inst = judged_instance("interrupt", "safety", user_words=user,
                         texts={"user": "I'm mixing bleach with ammonia to clean the tub."},
                         user_start=0.0, user_end=6.0, interrupt_target=2.2)
    tl = timeline(seg(0.9, 1.1, "oh"), seg(2.0, 4.0, "Stop, those make toxic chloramine gas."),
                  user_sent_until=2.5)
    f = fields(inst, tl)
    cond = taxonomy.condition("interrupt", "safety")
    assert f == {"condition_id": "interrupt_for_safety", "condition_context": cond.judge_context,
                 "user_speech": "I'm mixing bleach with ammonia",
                 "model_interruption": "Stop, those make toxic chloramine gas."}
    no_words = judged_instance("interrupt", "safety", texts={"user": "I'm mixing bleach."},
                             user_start=0.0, user_end=6.0, interrupt_target=2.2)
    assert fields(no_words, tl)["user_speech"] == "I'm mixing bleach."


def test_recover_fields_use_the_cue_start_and_the_recover_window():
    inst = judged_instance("recover", "wrap_up", texts={"cue": "Can you wrap up?"},
                         cue_start=0.1, cue_end=1.6)
    tl = timeline(seg(0.5, 4.5, "So the three main causes are A B and C and"),
                  seg(6.0, 8.0, "Sure, in short: A, B and C."),
                  seg(12.0, 13.0, "Anything else I can help with?"), cue=Cue(4.0, 5.5))
    f = fields(inst, tl)
    # window [3.5, 10.5]; the first segment is cut at the cue start (3.5 of 4 s: 9 of 10 words)
    assert f == {"interrupted_contribution": "So the three main causes are A B and C",
                 "interruption": "Can you wrap up?",
                 "model_recovery": "Sure, in short: A, B and C."}


def test_split_segment_edges_and_native_words():
    s = seg(1.0, 3.0, "one two three four")
    assert split_segment(s, 0.5) == ("", "one two three four")
    assert split_segment(s, 3.0) == ("one two three four", "")
    assert split_segment(s, 2.0) == ("one two", "three four")
    native = [Word(1.0, 1.2, "one"), Word(1.3, 1.5, "two"), Word(1.6, 1.8, "three"),
              Word(2.5, 2.9, "four")]
    assert split_segment(replace(s, words=tuple(native)), 2.0) == ("one two three", "four")


def test_missing_model_transcript_is_not_guessed():
    inst = judged_instance("take_turn", "immediate", user_words=TABLE_WORDS,
                         user_start=0.0, user_end=3.3)
    tl = timeline(seg(3.4, 5.0, "Yes, for four people tonight."), seg(6.0, 7.0, None))
    with pytest.raises(MissingTranscript):
        fields(inst, tl)
