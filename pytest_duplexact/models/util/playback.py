"""Clip playback for the built-in stepped models: schedule clips on the model's clock, cut
them short, render one output frame (audio + the native transcript words starting in it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...data.timeline import Word
from ...listen.activity import speech_spans
from ..contract import StepOutput

FADE_S = 0.01  # a cut fades out over 10 ms instead of clicking


@dataclass(frozen=True)
class Speech:
    """A clip ready to play: audio at the model rate, words relative to the clip start, and
    where its speech starts and ends inside it (so playback can be placed by speech onset)."""

    audio: np.ndarray
    words: tuple[Word, ...]
    speech_start: float
    speech_end: float

    @classmethod
    def of(cls, audio: np.ndarray, words: Sequence[Word] = (), text: str = "",
           sample_rate: int = 16_000) -> "Speech":
        audio = np.asarray(audio, dtype=np.float32)
        spans = speech_spans(audio, sample_rate)
        start = spans[0][0] if spans else 0.0
        end = spans[-1][1] if spans else len(audio) / sample_rate
        words = tuple(words)
        if not words and text.strip():  # no word timings: the whole text as one chunk
            words = (Word(start, end, text.strip()),)
        return cls(audio, words, start, end)

    @property
    def duration_of_speech(self) -> float:
        return self.speech_end - self.speech_start


@dataclass
class _Voice:
    speech: Speech
    start: int  # first sample on the model clock
    stop: int  # one past the last sample (after a cut, the end of the fade)
    fade_from: int | None = None


class Player:
    """Plays ``Speech`` clips on a sample clock: frame k covers [k*F, (k+1)*F)."""

    def __init__(self, sample_rate: int, frame_size: int):
        self.sample_rate = sample_rate
        self.frame_size = frame_size
        self._voices: list[_Voice] = []
        self._fade = max(1, int(FADE_S * sample_rate))

    def _sample(self, t: float) -> int:
        return int(round(t * self.sample_rate))

    def play(self, speech: Speech, onset: float, not_before: float = 0.0) -> float:
        """Schedule so that the clip's speech starts at ``onset`` seconds (the clip itself
        starts earlier by its leading silence, but never before ``not_before``, which is the
        next frame not yet rendered). Returns the actual speech onset."""
        start = max(self._sample(onset - speech.speech_start), self._sample(not_before))
        self._voices.append(_Voice(speech, start, start + len(speech.audio)))
        return start / self.sample_rate + speech.speech_start

    def cut(self, at: float) -> None:
        """Stop everything sounding at ``at`` (fading out) and drop what was scheduled later."""
        s = self._sample(at)
        kept = []
        for v in self._voices:
            if v.start >= s:
                continue
            if v.stop > s:
                v.stop, v.fade_from = min(v.stop, s + self._fade), s
            kept.append(v)
        self._voices = kept

    def busy_until(self) -> float:
        """End of the last speech still to play or playing (seconds); 0 when none is left
        (``render`` forgets clips that have finished)."""
        ends = [min(v.start / self.sample_rate + v.speech.speech_end, v.stop / self.sample_rate)
                for v in self._voices]
        return max(ends, default=0.0)

    def sounding(self, t: float) -> bool:
        s = self._sample(t)
        return any(v.start <= s < v.stop for v in self._voices)

    def render(self, frame_index: int) -> StepOutput:
        f0 = frame_index * self.frame_size
        f1 = f0 + self.frame_size
        out = np.zeros(self.frame_size, dtype=np.float32)
        words: list[Word] = []
        for v in self._voices:
            a, b = max(f0, v.start), min(f1, v.stop)
            if a < b:
                chunk = v.speech.audio[a - v.start: b - v.start]
                if v.fade_from is not None and b > v.fade_from:
                    pos = np.arange(a, b) - v.fade_from
                    chunk = chunk * np.clip(1.0 - pos / self._fade, 0.0, 1.0)
                out[a - f0: b - f0] += chunk
            for w in v.speech.words:
                ws = v.start + self._sample(w.start)
                if f0 <= ws < f1 and ws < (v.fade_from if v.fade_from is not None else v.stop):
                    rel = (ws - f0) / self.sample_rate
                    words.append(Word(rel, rel + (w.end - w.start), w.text))
        # Drop voices that are over so a long session does not slow down.
        self._voices = [v for v in self._voices if v.stop > f1]
        return StepOutput(out, tuple(words))
