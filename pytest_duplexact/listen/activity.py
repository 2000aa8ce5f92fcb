"""Online speech activity from frame energy, with hysteresis: for *decisions* made while a
trial runs (when the simulator injects its cue, when barge-in sees a takeover, when the
built-in models hear the user). Scoring never uses it: the timeline comes from the real VAD
(segmentation.py).

A frame is loud at or above ``on_db`` and quiet below ``off_db`` (dBFS of the frame's RMS);
levels in between keep the current state. Speech starts after ``onset_s`` of consecutive
loud frames and ends after ``hangover_s`` of consecutive quiet frames; both instants are
reported retroactively (the first loud frame, the first quiet frame), and decided when
confirmed, so a decision lags the audio by at most ``onset_s`` / ``hangover_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data.audio import SAMPLE_RATE

FRAME_S = 0.02
# Synthesised and recorded speech sits around -15..-30 dBFS per 20 ms frame; distant
# background speech (SPEC §8: -15 dB) still reaches about -40. Digital silence is -inf.
ON_DB = -40.0
OFF_DB = -50.0
ONSET_S = 0.04  # two 20 ms frames: a click is not speech
# Longer than the pause between two sentences (espeak-ng: ~0.3 s), so one turn stays one
# stretch; shorter than the 0.5 s hold_floor gap that matters for scoring.
HANGOVER_S = 0.35


def frame_db(frame: np.ndarray) -> float:
    """RMS level of a frame in dBFS (-inf for digital silence)."""
    if frame.size == 0:
        return float("-inf")
    rms = float(np.sqrt(np.mean(np.square(frame, dtype=np.float64))))
    return 20.0 * np.log10(rms) if rms > 0 else float("-inf")


@dataclass
class Change:
    kind: str  # "onset" or "offset"
    time: float  # the retroactive instant, seconds on the gate's clock


class EnergyGate:
    """Feed audio in any chunk sizes; read ``speaking``, ``onset``, ``offset``.

    Times are seconds from the first sample fed (plus ``origin``)."""

    def __init__(self, sample_rate: int = SAMPLE_RATE, *, frame_s: float = FRAME_S,
                 on_db: float = ON_DB, off_db: float = OFF_DB, onset_s: float = ONSET_S,
                 hangover_s: float = HANGOVER_S, origin: float = 0.0):
        if off_db > on_db:
            raise ValueError(f"off_db ({off_db}) must not exceed on_db ({on_db})")
        self.sample_rate = sample_rate
        self.frame = max(1, int(round(frame_s * sample_rate)))
        self.on_db, self.off_db = on_db, off_db
        self._onset_frames = max(1, int(round(onset_s / frame_s)))
        self._hang_frames = max(1, int(round(hangover_s / frame_s)))
        self.origin = origin
        self._pending = np.zeros(0, dtype=np.float32)
        self.frames = 0  # frames analysed
        self.speaking = False
        self.onset: float | None = None  # start of the current (or last) stretch
        self.offset: float | None = None  # end of the last finished stretch
        self.last_loud: float | None = None  # end of the last loud frame
        self._run = 0  # consecutive loud (when silent) / quiet (when speaking) frames

    def _t(self, frame_index: int) -> float:
        return self.origin + frame_index * self.frame / self.sample_rate

    @property
    def time(self) -> float:
        """End of the audio analysed so far."""
        return self._t(self.frames)

    def feed(self, samples: np.ndarray) -> list[Change]:
        data = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._pending.size:
            data = np.concatenate([self._pending, data])
        n = data.size // self.frame
        self._pending = data[n * self.frame:].copy()
        changes: list[Change] = []
        if n == 0:
            return changes
        frames = data[: n * self.frame].reshape(n, self.frame).astype(np.float64)
        rms = np.sqrt(np.mean(frames * frames, axis=1))
        with np.errstate(divide="ignore"):
            levels = 20.0 * np.log10(rms)
        if not self.speaking and levels.max() < self.on_db:
            # nothing loud while silent (a quiet model, most of a session): each frame would
            # only reset the onset run; the same state in one step
            self.frames += n
            self._run = 0
            return changes
        for level in levels:
            i = self.frames
            self.frames += 1
            if level >= self.on_db:
                self.last_loud = self._t(i + 1)
            if not self.speaking:
                self._run = self._run + 1 if level >= self.on_db else 0
                if self._run >= self._onset_frames:
                    self.speaking, self.onset, self._run = True, self._t(i + 1 - self._run), 0
                    changes.append(Change("onset", self.onset))
            else:
                self._run = self._run + 1 if level < self.off_db else 0
                if self._run >= self._hang_frames:
                    self.speaking, self.offset, self._run = False, self._t(i + 1 - self._run), 0
                    changes.append(Change("offset", self.offset))
        return changes


def speech_spans(samples: np.ndarray, sample_rate: int = SAMPLE_RATE,
                 **gate_options) -> list[tuple[float, float]]:
    """Offline: the gate's speech stretches over a whole clip, as (start, end) seconds; a
    stretch still open at the end of the clip ends at its last loud frame."""
    gate = EnergyGate(sample_rate, **gate_options)
    spans: list[tuple[float, float]] = []
    start = None
    for ch in gate.feed(samples):
        if ch.kind == "onset":
            start = ch.time
        else:
            spans.append((start, ch.time))
    if gate.speaking:
        spans.append((start, gate.last_loud))
    return spans


def squeeze_pauses(samples: np.ndarray, max_pause_s: float, keep_s: float,
                   sample_rate: int = SAMPLE_RATE) -> tuple[np.ndarray, Callable[[float], float]]:
    """Shorten every silence *between* speech stretches longer than ``max_pause_s`` to
    ``keep_s``. Returns the new audio and a function mapping a time in the original clip to
    the new one (for moving transcript words along)."""
    spans = speech_spans(samples, sample_rate, hangover_s=FRAME_S)
    cuts: list[tuple[float, float]] = []  # (original time, seconds removed from there on)
    pieces, cursor = [], 0
    for (_, prev_end), (next_start, _) in zip(spans, spans[1:]):
        if next_start - prev_end > max_pause_s:
            a = int(round((prev_end + keep_s / 2) * sample_rate))
            b = int(round((next_start - keep_s / 2) * sample_rate))
            pieces.append(samples[cursor:a])
            cursor = b
            cuts.append((prev_end + keep_s / 2, (b - a) / sample_rate))
    pieces.append(samples[cursor:])
    out = np.concatenate(pieces).astype(np.float32) if pieces else samples

    def remap(t: float) -> float:
        shift = 0.0
        for at, removed in cuts:
            if t >= at + removed:
                shift += removed
            elif t > at:  # inside a removed stretch of silence
                shift += t - at
        return t - shift

    return out, remap
