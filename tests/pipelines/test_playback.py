"""PlaybackBuffer: what a listener hears when audio arrives faster than real time (pure)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.pipelines.streaming_duplex import MAX_ITEM_TEXT, MAX_QUEUED_S, PlaybackBuffer

SR = 1000  # a small rate keeps the arithmetic readable: 1 sample = 1 ms


def ones(seconds: float) -> np.ndarray:
    return np.ones(int(round(seconds * SR)), np.float32)


def heard_spans(buf: PlaybackBuffer, until: float) -> list[tuple[float, float]]:
    y = buf.audio(until)
    edges = np.diff(np.concatenate([[0], (y != 0).astype(int), [0]]))
    return [(a / SR, b / SR) for a, b in zip(np.flatnonzero(edges == 1),
                                             np.flatnonzero(edges == -1))]


def test_audio_arriving_early_queues_behind_what_is_playing():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0.5))
    buf.add_audio(1.1, "a", ones(0.5))  # arrives while the first half still plays
    assert heard_spans(buf, 3.0) == [(1.0, 2.0)]
    assert heard_spans(buf, 1.4) == [(1.0, 1.4)]  # only what has played by then


def test_a_flood_of_audio_ahead_of_the_clock_is_a_model_error():
    """A server that sends audio without end (issue 32 fuzzing): queued up to MAX_QUEUED_S
    ahead of its arrival, then a model error naming the bound instead of a growing track."""
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(MAX_QUEUED_S - 1))
    with pytest.raises(ModelError, match="MAX_QUEUED_S"):
        buf.add_audio(1.5, "a", ones(2))
    buf.add_audio(MAX_QUEUED_S, "a", ones(2))  # once it has played down, more is fine


def test_a_flood_of_text_for_one_item_is_a_model_error():
    buf = PlaybackBuffer(SR)
    buf.add_text("a", "x" * MAX_ITEM_TEXT)
    with pytest.raises(ModelError, match="MAX_ITEM_TEXT"):
        buf.add_text("a", "y")
    buf.add_text("b", "y")  # another item has its own


def test_audio_arriving_after_a_gap_starts_at_its_arrival():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0.2))
    buf.add_audio(1.5, "a", ones(0.2))
    assert heard_spans(buf, 3.0) == [(1.0, 1.2), (1.5, 1.7)]


def test_interrupt_stops_playback_drops_the_queue_and_reports_played_ms():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(1.0))
    assert buf.playing(1.3)
    assert buf.interrupt(1.3) == [("a", 300)]
    assert not buf.playing(1.3)
    buf.add_audio(1.35, "a", ones(0.5))  # generated before the barge-in: never heard
    buf.add_audio(2.0, "b", ones(0.2))   # the next response plays normally
    assert heard_spans(buf, 3.0) == [(1.0, 1.3), (2.0, 2.2)]


def test_interrupt_after_a_finished_item_cuts_nothing():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0.5))
    buf.finish("a")
    assert buf.interrupt(2.0) == []
    assert heard_spans(buf, 3.0) == [(1.0, 1.5)]


def test_interrupt_cuts_every_item_with_unplayed_audio():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0.5))
    buf.add_audio(1.0, "b", ones(0.5))  # queued behind a: 1.5-2.0
    assert buf.interrupt(1.2) == [("a", 200), ("b", 0)]
    assert heard_spans(buf, 3.0) == [(1.0, 1.2)]


def test_words_wait_for_the_item_then_follow_playback():
    buf = PlaybackBuffer(SR)
    buf.add_text("a", "one two")  # text before audio, as realtime APIs send it
    buf.add_audio(1.0, "a", ones(0.7))
    assert buf.words(5.0) == []  # the item's length is unknown: no guessing
    buf.finish("a")
    # "one" = chars [0, 3) of 7 -> [1.0, 1.3]; "two" = [4, 7) -> [1.4, 1.7]
    assert [(w.text, w.start, w.end) for w in buf.words(1.5)] == [("one", 1.0, 1.3)]
    assert [w.text for w in buf.words(1.7)] == ["one", "two"]


def test_words_follow_gaps_in_playback():
    buf = PlaybackBuffer(SR)
    buf.add_text("a", "aa bb")
    buf.add_audio(1.0, "a", ones(0.25))
    buf.add_audio(2.0, "a", ones(0.25))  # ran dry, resumed at its arrival
    buf.finish()
    w = buf.words(9.0)
    assert [(x.text, x.start, x.end) for x in w] == [("aa", 1.0, 1.2), ("bb", 2.05, 2.25)]


def test_words_cut_by_a_barge_in_are_never_heard():
    buf = PlaybackBuffer(SR)
    buf.add_text("a", "one two three four")  # 18 chars over 1.8 s
    buf.add_audio(1.0, "a", ones(1.8))
    buf.interrupt(1.9)  # "one two" ([1.0, 1.7]) played; "three" cut mid-word
    buf.finish()
    assert [w.text for w in buf.words(9.0, final=True)] == ["one", "two"]


def test_final_words_include_unfinished_items():
    buf = PlaybackBuffer(SR)
    buf.add_text("a", "hi")
    buf.add_audio(0.0, "a", ones(0.2))
    assert buf.words(1.0) == []
    assert [w.text for w in buf.words(1.0, final=True)] == ["hi"]


# --- the invariant the simulator relies on: never ahead of playback ----------------------

_ops = st.lists(st.one_of(
    st.tuples(st.just("audio"), st.integers(0, 2), st.integers(1, 400)),
    st.tuples(st.just("text"), st.integers(0, 2), st.sampled_from(["a ", "bb ", "ccc", " d"])),
    st.tuples(st.just("done"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("interrupt"), st.just(0), st.just(0)),
    st.tuples(st.just("wait"), st.just(0), st.integers(0, 500)),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_transcript_is_never_ahead_of_playback(ops):
    buf = PlaybackBuffer(SR)
    t = 0.0
    done: set[int] = set()
    snapshots = []
    for op, item, value in ops:
        if op == "audio" and item not in done:
            buf.add_audio(t, f"i{item}", ones(value / SR))
        elif op == "text" and item not in done:
            buf.add_text(f"i{item}", value)
        elif op == "done":
            buf.finish(f"i{item}")
            done.add(item)
        elif op == "interrupt":
            buf.interrupt(t)
        elif op == "wait":
            t += value / SR
        snapshots.append((t, buf.words(t)))
    end = t + 10.0  # past anything queued
    final = {(w.start, w.end, w.text) for w in buf.words(end, final=True)}
    heard = buf.audio(end)
    for at, words in snapshots:
        for w in words:
            assert w.end <= at + 1e-9, f"{w} visible at {at}"
            assert (w.start, w.end, w.text) in final  # what was shown is never revised
            # a visible word starts and ends on audio that was actually played (an underrun
            # may leave a gap inside it)
            assert heard[int(round(w.start * SR))] and heard[int(round(w.end * SR)) - 1]


def test_rejects_nothing_silently_on_empty_audio():
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0))
    assert heard_spans(buf, 2.0) == []
    assert buf.interrupt(1.0) == []


@pytest.mark.parametrize("at", [0.0, 0.9999, 1.0])
def test_interrupt_before_or_at_the_start_plays_nothing(at):
    buf = PlaybackBuffer(SR)
    buf.add_audio(1.0, "a", ones(0.5))
    assert buf.interrupt(at) == [("a", 0)]
    assert heard_spans(buf, 3.0) == []
