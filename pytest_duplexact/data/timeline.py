"""The model timeline: what the model said, when, on the instance's clock (SPEC §2).

Plain data only. ``t = 0`` is the first streamed input sample; every time here is seconds on
that clock. Building a Timeline from audio (VAD, transcripts) lives in ``segmentation.py``;
the rules in ``rules/`` read nothing but these types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .taxonomy import BACKCHANNEL_MAX_WORDS

# Times on this clock come from sample counts (a VAD edge) and from sums (user_end + 0.5, a
# gap's end - start), so one instant can differ in its last bits (1.386 - 1.086 < 0.3 in
# binary floats). Every comparison of a time with an edge tolerates EPS: 1 us is 1/62 of a
# 16 kHz sample, so it never merges two instants a recording can tell apart, and it keeps
# "exactly on the edge" on the edge (rules/common.py, listen/segmentation.py).
EPS = 1e-6

# A word starts with a letter or digit, so a stray quote mark ("okay ' sure") is no word.
_WORD = re.compile(r"\w[\w']*(?:[-.][\w']+)*", re.UNICODE)


def count_words(text: str | None) -> int:
    """Words as the paper counts them: alphanumeric tokens; punctuation and fillers' marks
    ("hmm?", "uh-huh.") do not add words, hyphenated and dotted tokens count once."""
    if not text:
        return 0
    return len(_WORD.findall(text))


@dataclass(frozen=True)
class Span:
    """A closed interval [start, end] in seconds."""

    start: float
    end: float

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"span ends before it starts: [{self.start}, {self.end}]")

    @property
    def duration(self) -> float:
        return self.end - self.start

    def __str__(self) -> str:
        return f"[{self.start:.2f}, {self.end:.2f}] s"


@dataclass(frozen=True)
class Word:
    """A timed word or chunk of text (a native transcript or an ASR result)."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Segment:
    """A maximal stretch of model speech (after merging short gaps) with its transcript.

    ``text`` is ``None`` when no transcript source was available; rules that need a word count
    then refuse to guess (see ``word_count``). ``words``: the timed words the text was joined
    from (native transcript or ASR, on the timeline clock), empty when none were timed; the
    judges' inputs split a segment at an instant by them (rules/speech.py).
    """

    start: float
    end: float
    text: str | None = None
    words: tuple[Word, ...] = ()

    @property
    def span(self) -> Span:
        return Span(self.start, self.end)

    @property
    def word_count(self) -> int:
        if self.text is None:
            raise MissingTranscript(self)
        return count_words(self.text)

    @property
    def is_backchannel(self) -> bool:
        return self.word_count <= BACKCHANNEL_MAX_WORDS

    @property
    def is_substantive(self) -> bool:
        return self.word_count > BACKCHANNEL_MAX_WORDS

    def describe(self) -> str:
        text = "?" if self.text is None else repr(self.text)
        return f"{self.start:.2f}-{self.end:.2f} s {text}"


class MissingTranscript(RuntimeError):
    def __init__(self, segment: Segment):
        super().__init__(
            f"model segment {segment.start:.2f}-{segment.end:.2f} s has no transcript; "
            "configure a transcriber (--duplexact-transcriber) or use a model that supplies "
            "native time-aligned text"
        )
        self.segment = segment


@dataclass(frozen=True)
class Cue:
    """A user cue injected by Simulator Replay: its speech interval on the timeline."""

    start: float
    end: float
    forced: bool = False  # force-injected at the deadline (SPEC §7)

    @property
    def span(self) -> Span:
        return Span(self.start, self.end)


@dataclass(frozen=True)
class Timeline:
    """Everything the rules see of one trial.

    ``segments``: merged model speech segments with transcripts, sorted.
    ``speech``: raw VAD speech intervals (before merging), used where silence gaps matter
    (hold_floor); when absent, the segments stand in.
    ``duration``: end of the recording (seconds).
    ``cue``: the injected cue for Simulator Replay, else ``None``.
    ``user_sent_until``: for barge-in, where the harness stopped sending user audio.
    ``unaligned``: transcript words that fell in no segment (a diagnostic, never scored).
    """

    segments: tuple[Segment, ...]
    duration: float
    speech: tuple[Span, ...] | None = None
    cue: Cue | None = None
    user_sent_until: float | None = None
    events: tuple[tuple[float, str], ...] = field(default=())
    unaligned: tuple[Word, ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "segments", tuple(sorted(self.segments, key=lambda s: s.start)))
        if self.speech is not None:
            object.__setattr__(self, "speech", tuple(sorted(self.speech, key=lambda s: s.start)))

    @property
    def speech_spans(self) -> tuple[Span, ...]:
        if self.speech is not None:
            return self.speech
        return tuple(s.span for s in self.segments)

    def with_segments(self, segments) -> "Timeline":
        return replace(self, segments=tuple(segments))
