"""Builders for rule tests: segments with a known word count, annotations, and hypothesis
strategies that crowd the window edges (timelines: tests/support/builders.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from pytest_duplexact.data.instance import Annotations
from pytest_duplexact.data.timeline import Segment

# Each token counts as exactly one word (count_words): fillers and punctuated tokens included.
VOCAB = ("okay", "uh-huh", "mm-hmm.", "right?", "I'm", "so,", "the", "plan", "U.S.", "works",
         "3.5", "don't")
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def text(n: int) -> str:
    """A transcript of exactly n words."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def sub(start: float, end: float, n: int = 4) -> Segment:
    """A substantive segment (default 4 words: the smallest substantive count)."""
    return Segment(start, end, text(n))


def bc(start: float, end: float, n: int = 3) -> Segment:
    """A backchannel segment (default 3 words: the largest backchannel count)."""
    return Segment(start, end, text(n))


def ann(**kw) -> Annotations:
    return Annotations(**kw)


def edge_probes(lo: float, hi: float) -> list[tuple[str, float, bool]]:
    """(name, instant, inside?) on and around both edges of an inclusive window, ±1 ms."""
    return [("lo-1ms", lo - 0.001, False), ("lo", lo, True), ("lo+1ms", lo + 0.001, True),
            ("hi-1ms", hi - 0.001, True), ("hi", hi, True), ("hi+1ms", hi + 0.001, False)]


# Overlap windows (wait, ignore): (name, substantive segment built from the window (lo, hi),
# does the rule still succeed?).
OVERLAP_EDGE_CASES = [
    ("ends exactly at window start", lambda lo, hi: (lo - 1.0, lo), True),
    ("ends 1 ms into the window", lambda lo, hi: (lo - 1.0, lo + 0.001), False),
    ("ends 1 ms before the window", lambda lo, hi: (lo - 1.0, lo - 0.001), True),
    ("starts exactly at window end", lambda lo, hi: (hi, hi + 1.0), True),
    ("starts 1 ms before window end", lambda lo, hi: (hi - 0.001, hi + 1.0), False),
    ("starts 1 ms after window end", lambda lo, hi: (hi + 0.001, hi + 1.0), True),
    ("strictly inside", lambda lo, hi: (lo + 0.1, hi - 0.1), False),
    ("covers the window", lambda lo, hi: (lo - 5.0, hi + 5.0), False),
]
OVERLAP_IDS = [c[0] for c in OVERLAP_EDGE_CASES]


# --- hypothesis ------------------------------------------------------------------------------

MS = 1000  # strategies draw integer milliseconds, so "on the edge" is exact


def instants(edges_ms: tuple[int, ...] = (), lo_ms: int = 0, hi_ms: int = 20_000):
    """Milliseconds in [lo_ms, hi_ms], often exactly on or 1 ms beside one of ``edges_ms``."""
    near = [e + d for e in edges_ms for d in (-1, 0, 1) if lo_ms <= e + d <= hi_ms]
    base = st.integers(lo_ms, hi_ms)
    return st.one_of(base, st.sampled_from(near)) if near else base


@st.composite
def word_text(draw, min_words: int = 1, max_words: int = 8) -> str:
    n = draw(st.integers(min_words, max_words))
    return " ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=n, max_size=n)))


@st.composite
def segment_lists(draw, edges_ms: tuple[int, ...] = (), lo_ms: int = 0, hi_ms: int = 20_000,
                  max_segments: int = 5, min_words: int = 1, max_words: int = 8):
    """Sorted, disjoint model segments with 1..8-word transcripts, boundaries often on the
    given edges."""
    n = draw(st.integers(0, max_segments))
    pts = draw(st.lists(instants(edges_ms, lo_ms, hi_ms), min_size=2 * n, max_size=2 * n,
                        unique=True))
    pts.sort()
    return [Segment(pts[2 * i] / MS, pts[2 * i + 1] / MS,
                    draw(word_text(min_words, max_words))) for i in range(n)]


def shifted(seg: Segment, d: float) -> Segment:
    return Segment(seg.start + d, seg.end + d, seg.text)
