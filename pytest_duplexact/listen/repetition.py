"""A phrase a Whisper decoder loops on, kept once.

Whisper can repeat a short phrase it has just written ("got it, got it, got it, got it"), and
the three-word line (data/taxonomy.py BACKCHANNEL_MAX_WORDS) then reads a backchannel as a
substantive reply. ``collapse_loops`` keeps the first copy of any run of ``MIN_REPEATS`` or
more back-to-back copies of the same 1- to ``MAX_NGRAM``-word phrase (compared without case
or punctuation). Two copies are left alone: people do say "no, no" or "right, right".
A pure function of the words, so the cached decoder output stays the decoder's.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..data.timeline import Word

MIN_REPEATS = 3
MAX_NGRAM = 4
_PUNCT = re.compile(r"[^\w']+")


def _key(text: str) -> str:
    return _PUNCT.sub("", text.lower())


def collapse_loops(words: Sequence[Word], min_repeats: int = MIN_REPEATS,
                   max_ngram: int = MAX_NGRAM) -> tuple[Word, ...]:
    """``words`` with every run of ``min_repeats``+ consecutive copies of one n-gram
    (n <= ``max_ngram``) cut to its first copy; shorter n-grams are tried first, so
    "no no no no" is one "no", not two "no no"."""
    words = tuple(words)
    keys = [_key(w.text) for w in words]
    out: list[Word] = []
    i = 0
    while i < len(words):
        for n in range(1, max_ngram + 1):
            gram = keys[i:i + n]
            if len(gram) < n or not all(gram):
                continue
            copies = 1
            while keys[i + copies * n:i + (copies + 1) * n] == gram:
                copies += 1
            if copies >= min_repeats:
                out.extend(words[i:i + n])
                i += copies * n
                break
        else:
            out.append(words[i])
            i += 1
    return tuple(out)
