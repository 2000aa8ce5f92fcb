"""A looped phrase is kept once (listen/repetition.py), so a Whisper loop does not carry a
backchannel over the three-word line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.data.taxonomy import BACKCHANNEL_MAX_WORDS
from pytest_duplexact.data.timeline import Word, count_words
from pytest_duplexact.listen.repetition import MIN_REPEATS, collapse_loops


def words(text: str) -> tuple[Word, ...]:
    return tuple(Word(0.3 * k, 0.3 * k + 0.25, t) for k, t in enumerate(text.split()))


def text(ws) -> str:
    return " ".join(w.text for w in ws)


def test_a_looped_backchannel_stays_under_the_three_word_line():
    looped = words("Got it, got it, got it, got it.")
    assert count_words(text(looped)) > BACKCHANNEL_MAX_WORDS
    kept = collapse_loops(looped)
    assert text(kept) == "Got it,"
    assert count_words(text(kept)) <= BACKCHANNEL_MAX_WORDS
    assert kept == looped[:2]  # the first copy, with its own times


def test_two_copies_are_speech_not_a_loop():
    for said in ("no, no", "right, right, okay", "got it, got it"):
        assert collapse_loops(words(said)) == words(said)


def test_a_loop_inside_a_reply_keeps_what_surrounds_it():
    ws = words("sure the the the the plan is fine")
    assert text(collapse_loops(ws)) == "sure the plan is fine"
    ws = words("yes and that's true and that's true and that's true okay")
    assert text(collapse_loops(ws)) == "yes and that's true okay"


def test_the_shortest_repeating_unit_wins():
    assert text(collapse_loops(words("no no no no no no"))) == "no"


def test_nothing_to_collapse():
    assert collapse_loops(()) == ()
    ws = words("Yes, and that's true.")
    assert collapse_loops(ws) == ws


_word = st.sampled_from("alpha bravo charlie delta echo foxtrot golf hotel india".split())


@given(st.lists(_word, min_size=0, max_size=3, unique=True),
       st.lists(_word, min_size=1, max_size=4, unique=True),
       st.integers(MIN_REPEATS, 7), st.lists(_word, min_size=0, max_size=3, unique=True))
def test_any_loop_between_other_words_is_cut_to_one_copy(before, gram, copies, after):
    # words outside the loop never repeat the loop's words, so only the loop can collapse
    before = [w for w in before if w not in gram]
    after = [w for w in after if w not in gram and w not in before]
    ws = words(" ".join(before + gram * copies + after))
    assert text(collapse_loops(ws)) == " ".join(before + gram + after)


@given(st.lists(_word, max_size=20))
def test_the_result_is_the_input_with_words_removed(seq):
    ws = words(" ".join(seq))
    kept = collapse_loops(ws)
    it = iter(ws)
    assert all(any(k is w for w in it) for k in kept)  # a subsequence, same objects
    if len(set(seq)) == len(seq):
        assert kept == ws
