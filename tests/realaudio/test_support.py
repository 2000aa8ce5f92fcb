"""The real-audio harness's own measurements on synthetic signals (these run without the
published outputs): the audio onset and its lead-in, closed pauses, published words over
silence, and the published words as a timeline."""

from __future__ import annotations

import numpy as np

from pytest_duplexact.data.timeline import Span, Word
from tests.realaudio.support import (
    audio_onset,
    closed_pauses,
    words_over_silence,
    words_timeline,
)

SR = 16_000


def tone(seconds: float, dbfs: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(seconds * SR)) * 10 ** (dbfs / 20)).astype(np.float32)


def test_onset_after_digital_silence_and_after_murmur():
    x = np.concatenate([np.zeros(SR, np.float32), tone(1.0, -20)])
    on = audio_onset(x, SR)
    assert abs(on.first_loud - 1.0) < 0.002 and on.lead_in() == "digital silence"
    assert on.quiet_lead_in
    y = np.concatenate([np.zeros(SR // 2, np.float32), tone(0.5, -55), tone(1.0, -20)])
    on = audio_onset(y, SR)
    assert abs(on.first_loud - 1.0) < 0.002 and abs(on.silent_until - 0.5) < 0.002
    assert not on.quiet_lead_in and -60 < on.lead_in_peak_dbfs < -40


def test_a_quiet_stretch_inside_one_span_is_a_closed_pause_and_a_short_one_is_not():
    x = np.concatenate([tone(1.0, -20), tone(0.4, -50, 1), tone(1.0, -20, 2),
                        tone(0.2, -50, 3), tone(1.0, -20, 4)])
    closed = closed_pauses(x, SR, (Span(0.0, len(x) / SR),))
    assert len(closed) == 1 and abs(closed[0].start - 1.0) < 0.02
    assert abs(closed[0].duration - 0.4) < 0.02
    # the same pause between two spans is kept: nothing closed
    assert closed_pauses(x, SR, (Span(0.0, 1.0), Span(1.4, len(x) / SR))) == []


def test_a_published_word_over_silence_is_found():
    x = np.concatenate([np.zeros(SR, np.float32), tone(1.0, -20)])
    words = (Word(0.0, 0.9, "A"), Word(1.0, 1.4, "yes"), Word(1.45, 1.9, "indeed"))
    assert words_over_silence(words, x, SR) == [words[0]]


def test_published_words_group_by_the_merge_gap():
    words = (Word(1.0, 1.2, "Yes,"), Word(1.6, 1.8, "it"), Word(1.85, 2.0, "is"),
             Word(2.1, 2.3, "mine."))
    tl = words_timeline(words, 5.0)
    assert [(s.start, s.end, s.text) for s in tl.segments] == [
        (1.0, 1.2, "Yes,"), (1.6, 2.3, "it is mine.")]
