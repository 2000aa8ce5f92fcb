"""Interval helpers shared by the rules. Conventions, used everywhere:

- An onset is *inside* a window when ``lo <= onset <= hi`` (both edges count).
- A segment *overlaps* a window when they share time of positive length
  (``seg.start < hi and lo < seg.end``); touching at one end point is not overlap.
"""

from __future__ import annotations

from ..timeline import Segment, Span, Timeline

# A model turn that is still sounding within this much of the recording's end has not ended
# (the VAD quantises ends to its 32 ms frames).
END_TOLERANCE_S = 0.1


def fmt_window(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}] s"


def substantive(tl: Timeline) -> list[Segment]:
    return [s for s in tl.segments if s.is_substantive]


def onsets_in(segments, lo: float, hi: float) -> list[Segment]:
    return [s for s in segments if lo <= s.start <= hi]


def overlapping(segments, lo: float, hi: float) -> list[Segment]:
    return [s for s in segments if s.start < hi and lo < s.end]


def active_at(tl: Timeline, t: float) -> Segment | None:
    """The model segment sounding at instant t (start <= t < end)."""
    for s in tl.segments:
        if s.start <= t < s.end:
            return s
    return None


def speech_overlaps(tl: Timeline, span: Span) -> bool:
    return any(sp.overlaps(span) for sp in tl.speech_spans)


def silence_gaps(speech: tuple[Span, ...], lo: float, hi: float) -> list[Span]:
    """Silent stretches inside [lo, hi], leading and trailing ones included."""
    gaps, cursor = [], lo
    for sp in speech:
        if sp.end <= lo or sp.start >= hi:
            continue
        if sp.start > cursor:
            gaps.append(Span(cursor, sp.start))
        cursor = max(cursor, sp.end)
    if cursor < hi:
        gaps.append(Span(cursor, hi))
    return gaps


def list_segments(segments, limit: int = 4) -> str:
    shown = "; ".join(s.describe() for s in segments[:limit])
    more = f" (+{len(segments) - limit} more)" if len(segments) > limit else ""
    return shown + more
