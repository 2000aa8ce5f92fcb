"""Place trimmed phrases on a clip's clock, so every boundary is known to the sample.

A Track is built left to right: silence, phrase, silence, ... Each placed phrase reports its
[start, end) in samples; annotations are read from those, never measured from audio. Word
times inside a phrase are estimates: the phrase's span is shared out over its words in
proportion to their character length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import tts

SR = tts.SR


@dataclass(frozen=True)
class Placed:
    start: int  # first sample of the phrase
    end: int  # one past its last sample
    text: str

    @property
    def start_s(self) -> float:
        return self.start / SR

    @property
    def end_s(self) -> float:
        return self.end / SR


class Track:
    def __init__(self, lead_s: float):
        self._parts: list[np.ndarray] = []
        self._pos = 0
        self.placed: list[Placed] = []
        self.silence(lead_s)

    @property
    def now(self) -> int:
        return self._pos

    @property
    def now_s(self) -> float:
        return self._pos / SR

    def silence(self, seconds: float) -> None:
        n = int(round(seconds * SR))
        self._parts.append(np.zeros(n, np.float32))
        self._pos += n

    def phrase(self, samples: np.ndarray, text: str) -> Placed:
        p = Placed(self._pos, self._pos + samples.size, text)
        self._parts.append(np.asarray(samples, np.float32))
        self._pos = p.end
        self.placed.append(p)
        return p

    def finish(self, tail_s: float) -> tuple[np.ndarray, list[dict]]:
        """(samples, word-level transcript) of the whole clip."""
        self.silence(tail_s)
        samples = np.concatenate(self._parts)
        peak = float(np.abs(samples).max()) if samples.size else 0.0
        if peak >= 1.0:
            raise ValueError(f"clip would clip (peak {peak:.2f}); lower tts.SPEECH_LEVEL_DBFS")
        return samples, [w for p in self.placed for w in words_of(p)]


def words_of(p: Placed) -> list[dict]:
    """The phrase's words over its exact span, each given time in proportion to its length."""
    words = p.text.split()
    total = sum(len(w) for w in words)
    out, acc = [], 0
    for w in words:
        a = p.start + (p.end - p.start) * acc / total
        acc += len(w)
        b = p.start + (p.end - p.start) * acc / total
        out.append({"start": round(a / SR, 3), "end": round(b / SR, 3), "text": w})
    # The phrase's own boundaries are exact; rounding must not move them.
    out[0]["start"], out[-1]["end"] = p.start_s, p.end_s
    return out
