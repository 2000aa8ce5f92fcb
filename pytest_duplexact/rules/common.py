"""Interval helpers shared by the rules. Conventions, used everywhere:

- An onset is *inside* a window when ``lo <= onset <= hi`` (both edges count).
- A segment *overlaps* a window when they share time of positive length
  (``seg.start < hi and lo < seg.end``); touching at one end point is not overlap.

Every boundary comparison tolerates ``EPS`` of float rounding (see ``inside``/``intersects``).
"""

from __future__ import annotations

from ..data.results import ImmediateResult, failure, success
from ..data.timeline import EPS, Segment, Span, Timeline  # EPS: why, there

# A model turn that is still sounding within this much of the recording's end has not ended
# (the VAD quantises ends to its 32 ms frames).
END_TOLERANCE_S = 0.1


def inside(t: float, lo: float, hi: float) -> bool:
    """``lo <= t <= hi``, both edges inclusive, up to EPS."""
    return lo - EPS <= t <= hi + EPS


def intersects(a0: float, a1: float, b0: float, b1: float) -> bool:
    """[a0, a1] and [b0, b1] share more than an end point (more than EPS of time)."""
    return a0 < b1 - EPS and b0 < a1 - EPS


def exceeds(value: float, limit: float) -> bool:
    """``value > limit`` beyond float rounding: a 0.50 s gap is not longer than 0.50 s."""
    return value > limit + EPS


def fmt_window(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}] s"


def fmt_near(t: float, *edges: float, sign: str = "") -> str:
    """``t`` with two decimals, or as many more (up to six) as it takes never to print as an
    edge it is not on: an onset 2 ms past a 0.5 s edge reads ``+0.502``, not ``+0.50``, so a
    message never contradicts itself. ``sign="+"`` prints the sign."""
    for digits in (2, 3, 4, 6):
        text = f"{t:{sign}.{digits}f}"
        if not any(abs(t - e) > EPS and text == f"{e:{sign}.{digits}f}" for e in edges):
            return text
    return text


def substantive(tl: Timeline) -> list[Segment]:
    return [s for s in tl.segments if s.is_substantive]


def onsets_in(segments, lo: float, hi: float) -> list[Segment]:
    return [s for s in segments if inside(s.start, lo, hi)]


def overlapping(segments, lo: float, hi: float) -> list[Segment]:
    return [s for s in segments if intersects(s.start, s.end, lo, hi)]


def active_at(tl: Timeline, t: float) -> Segment | None:
    """The model segment sounding at instant t (start <= t < end): a segment starting exactly
    at t is active, one ending exactly at t is not."""
    for s in tl.segments:
        if s.start - EPS <= t < s.end - EPS:
            return s
    return None


def speech_overlaps(tl: Timeline, span: Span) -> bool:
    return any(intersects(sp.start, sp.end, span.start, span.end) for sp in tl.speech_spans)


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


def silent_through(tl: Timeline, lo: float, hi: float, what: str) -> ImmediateResult:
    """wait and ignore: success when no substantive segment overlaps [lo, hi]."""
    hits = overlapping(substantive(tl), lo, hi)
    if hits:
        return failure(f"substantive speech overlaps {what} {fmt_window(lo, hi)}: "
                       f"{list_segments(hits)}", window=(lo, hi), onset=hits[0].start)
    return success(f"no substantive speech overlaps {what} {fmt_window(lo, hi)}",
                   window=(lo, hi))
