"""Text pieces on a frame clock -> timed ``Word``s: the one rule for a model that emits text
with its audio step by step (Moshi's inner monologue in process, a bridge's TEXT messages).

A piece that starts with "▁" (SentencePiece's word marker) begins a word; a frame without
text (``None``: padding) ends one. A word starts at the start of the frame of its first piece
and ends at the end of the frame of its last. It is reported in the frame in which it is known
to be complete (the next word or a frame without text), with its start in an earlier frame:
the transcript is never ahead of what the model has emitted, so a word still open when the
trial ends is not reported.

A word is put together from pieces each scrubbed where it was received, so a key split across
pieces is whole only in the word: each word is scrubbed again as it completes (with the word
before it, which may be a ``Bearer`` naming it). The mask replaces the word's text; its times
stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...data.timeline import Word
from ...remote.netsafety import scrub_received

_SPLIT = re.compile(r"(\s*)(\S*)")


@dataclass
class _OpenWord:
    text: str
    first: int  # frame of the first piece
    last: int  # frame of the last piece


class TextStream:
    """``feed(k, piece)`` takes frame k's piece (``None`` for no text) and returns the words
    completed by it, with times relative to the start of frame k."""

    def __init__(self, frame_s: float):
        self.frame_s = frame_s
        self._open: _OpenWord | None = None
        self._before = ""  # the last word as assembled: context for the next one's scrub

    def feed(self, k: int, piece: str | None) -> list[Word]:
        done: list[Word] = []
        if piece is None or piece.startswith("▁"):
            done = self._close(k)
        if piece:
            text = piece.replace("▁", " ").strip()
            if self._open is None:
                self._open = _OpenWord(text, k, k)
            else:
                self._open.text += text
                self._open.last = k
        return done

    def feed_text(self, k: int, text: str | None) -> list[Word]:
        """Frame k's plain text (a TEXT delta: leading whitespace begins a word, whitespace
        inside separates words, trailing whitespace ends the last one): ``feed`` per piece."""
        if not text:
            return self.feed(k, None)
        done: list[Word] = []
        for space, word in _SPLIT.findall(text):
            if space or word:
                done += self.feed(k, ("▁" if space else "") + word)
        return done

    def _close(self, k: int) -> list[Word]:
        w, self._open = self._open, None
        if w is None or not w.text:
            return []
        # neither word holds whitespace, nor does any mask: the last space parts them again
        text = scrub_received(f"{self._before} {w.text}").rsplit(" ", 1)[-1]
        self._before = w.text
        return [Word((w.first - k) * self.frame_s, (w.last + 1 - k) * self.frame_s, text)]
