"""Recording -> Timeline: the model's speech segments with their transcripts (docs/timeline.md).

``build_timeline`` runs the VAD over the output track (vad.py), keeps the raw intervals as
``Timeline.speech`` (hold_floor measures gaps on them), merges intervals separated by less
than ``merge_gap`` into segments, and gives each segment its text from, in order:

1. the model's native time-aligned transcript (``Recording.transcript``), when it has words:
   each word goes to the segment containing its midpoint, else to the nearest segment within
   ``word_tolerance``; words near no segment are kept in ``Timeline.unaligned``;
2. the transcriber, run on each segment's own audio, words shifted onto the timeline;
3. neither: ``text=None``, and a rule that needs a word count raises MissingTranscript, so the
   instance is reported as an error, never scored on a guess.

Only the VAD call and the transcriber touch audio; ``merge_spans`` and ``assign_words`` are
pure and tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data.timeline import EPS, Segment, Span, Timeline, Word
from . import vad

# Pauses shorter than this stay inside one segment: clause pauses (espeak: <= 0.15 s) and the
# fixtures' 0.2 s between a turn's sentences do; "Yeah. [0.4 s] So ..." stays a backchannel
# and an answer. 0.25-0.3 s reproduce the fixtures' placement exactly (docs/timeline.md).
MERGE_GAP_S = 0.3
# A native-transcript word whose midpoint is in no segment joins the nearest one this close.
# Streaming transcripts run up to a few hundred ms off the audio they describe.
WORD_TOLERANCE_S = 0.5
# Audio around a segment given to the transcriber (Whisper hears the onset better with a
# little lead-in). Never more than half of merge_gap, so it cannot reach the next segment.
TRANSCRIBE_PAD_S = 0.1


def merge_spans(spans: Sequence[Span], merge_gap: float = MERGE_GAP_S) -> list[Span]:
    """Sorted, disjoint spans where every gap is >= ``merge_gap`` and > 0: spans whose gap is
    shorter, and spans that touch or overlap, are joined. Each input span lies inside exactly
    one output span."""
    if merge_gap < 0:
        raise ValueError(f"merge_gap must be >= 0 s, got {merge_gap}")
    out: list[Span] = []
    for sp in sorted(spans, key=lambda s: (s.start, s.end)):
        # a gap of exactly merge_gap, in samples, may come out a few ulps short in seconds
        if out and (sp.start - out[-1].end < merge_gap - EPS or sp.start <= out[-1].end):
            if sp.end > out[-1].end:
                out[-1] = Span(out[-1].start, sp.end)
        else:
            out.append(sp)
    return out


@dataclass(frozen=True)
class Assignment:
    """Words per segment (same order as the segments) and the words that fit none."""

    words: tuple[tuple[Word, ...], ...]
    unaligned: tuple[Word, ...]

    def texts(self) -> list[str]:
        return [join_words(ws) for ws in self.words]


def assign_words(segments: Sequence[Span], words: Sequence[Word],
                 tolerance: float = WORD_TOLERANCE_S) -> Assignment:
    """Each word to the segment containing its midpoint (the earlier one when it sits exactly
    on a shared edge), else to the segment nearest its midpoint if within ``tolerance``
    (ties go to the earlier segment), else to ``unaligned``. Words keep their order."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0 s, got {tolerance}")
    segs = sorted(segments, key=lambda s: s.start)
    if [s.start for s in segs] != [s.start for s in segments]:
        raise ValueError("segments must be sorted by start time")
    buckets: list[list[Word]] = [[] for _ in segs]
    unaligned: list[Word] = []
    for w in sorted(words, key=lambda w: (w.start, w.end)):
        mid = (w.start + w.end) / 2
        best, best_d = None, None
        for k, s in enumerate(segs):
            d = 0.0 if s.start <= mid <= s.end else min(abs(mid - s.start), abs(mid - s.end))
            if best_d is None or d < best_d:
                best, best_d = k, d
            if d == 0.0:
                break
        if best is not None and best_d <= tolerance:
            buckets[best].append(w)
        else:
            unaligned.append(w)
    return Assignment(tuple(tuple(b) for b in buckets), tuple(unaligned))


def join_words(words: Sequence[Word]) -> str:
    return " ".join(w.text.strip() for w in words if w.text.strip())


def transcribe_segments(output: np.ndarray, sample_rate: int, segments: Sequence[Span],
                        transcriber, merge_gap: float = MERGE_GAP_S) -> list[tuple[Word, ...]]:
    """Each segment's words from the transcriber run on that segment's own audio (padded by
    TRANSCRIBE_PAD_S, at most half the merge gap, so never reaching a neighbour), shifted
    onto the timeline clock."""
    pad = min(TRANSCRIBE_PAD_S, merge_gap / 2)
    out = []
    for seg in segments:
        a = max(0, int(np.floor((seg.start - pad) * sample_rate)))
        b = min(len(output), int(np.ceil((seg.end + pad) * sample_rate)))
        offset = a / sample_rate
        words = transcriber.transcribe(output[a:b], sample_rate)
        out.append(tuple(Word(w.start + offset, w.end + offset, w.text) for w in words))
    return out


def build_timeline(recording, transcriber=None, merge_gap: float = MERGE_GAP_S, *,
                   vad_params: vad.VadParams = vad.DEFAULT_PARAMS,
                   word_tolerance: float = WORD_TOLERANCE_S, vad_cache=None,
                   speech: Sequence[Span] | None = None) -> Timeline:
    """The Timeline the rules score, from a Recording (pipelines/duplex.py). ``vad_cache``: a
    RequestCache for the VAD's result (vad.speech_spans). ``speech``: that result for this
    recording's output with ``vad_params``, already computed elsewhere (the scoring worker:
    run/offload.py); the VAD is then not run here."""
    if speech is None:
        cached = {} if vad_cache is None else {"cache": vad_cache}
        speech = vad.speech_spans(recording.output, recording.sample_rate, vad_params, **cached)
    merged = merge_spans(speech, merge_gap)
    unaligned: tuple[Word, ...] = ()
    words: list[tuple[Word, ...]] = [()] * len(merged)
    if recording.transcript:
        assigned = assign_words(merged, recording.transcript, word_tolerance)
        texts: list[str | None] = assigned.texts()
        words, unaligned = list(assigned.words), assigned.unaligned
    elif transcriber is not None:
        words = transcribe_segments(recording.output, recording.sample_rate, merged,
                                    transcriber, merge_gap)
        texts = [join_words(ws) for ws in words]
    else:
        texts = [None] * len(merged)
    return Timeline(
        segments=tuple(Segment(s.start, s.end, t, ws)
                       for s, t, ws in zip(merged, texts, words)),
        duration=recording.duration,
        speech=tuple(speech),
        cue=recording.cue,
        user_sent_until=recording.user_sent_until,
        events=tuple((float(t), str(what)) for t, what in recording.events),
        unaligned=unaligned,
    )
