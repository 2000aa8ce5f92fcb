"""Tiny hand-made instances for the pipeline and model tests: tones stand in for speech (the
online detectors and the oracle only look at energy), with made-up word timings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from pytest_duplexact.data import audio
from pytest_duplexact.data.annotations import Instance
from pytest_duplexact.data.timeline import Word
from pytest_duplexact.listen.activity import speech_spans
from tests.support.builders import make_instance, spread

SR = audio.SAMPLE_RATE


def tone(seconds: float, freq: float = 220.0, level_db: float = -20.0) -> np.ndarray:
    n = int(round(seconds * SR))
    t = np.arange(n) / SR
    x = np.sin(2 * np.pi * freq * t) * (10 ** (level_db / 20) * np.sqrt(2))
    ramp = min(n // 2, int(0.005 * SR))
    if ramp:
        x[:ramp] *= np.linspace(0, 1, ramp)
        x[n - ramp:] *= np.linspace(1, 0, ramp)
    return x.astype(np.float32)


def gap(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * SR)), dtype=np.float32)


def cat(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts).astype(np.float32)


REF_TEXT = "that sounds like a really good plan to me"


def reference(seconds: float = 3.0) -> tuple[np.ndarray, tuple[Word, ...]]:
    return cat(gap(0.1), tone(seconds, 330.0), gap(0.1)), spread(REF_TEXT, 0.1, 0.1 + seconds)


def direct_instance(tmp: Path, action: str, condition: str) -> Instance:
    """User speech 0.5-2.5 s, (a 0.6 s pause,) more speech until user_end; 0.5 s of tail."""
    parts = [gap(0.5), tone(2.0)]
    ann = {"user_start": 0.5}
    if condition in ("inter_sentential_pause", "intra_sentential_pause"):
        ann.update(pause_start=2.5, pause_end=3.1)
        parts += [gap(0.6), tone(1.5)]
    elif action == "ignore":
        parts += [tone(1.0, level_db=-35.0), tone(1.0)]
        ann.update(other_start=2.5, other_end=3.5)
    elif action == "interrupt":
        parts += [tone(4.0)]
        ann.update(interrupt_target=2.0)
    else:
        parts += [tone(1.0)]
    user = cat(*parts)
    ann["user_end"] = len(user) / SR
    if action == "backchannel":
        ann["backchannel_point"] = 1.5
    user = cat(user, gap(0.5))
    words = spread("so I was thinking we could go there on friday", 0.5, ann["user_end"])
    clips = {"user": (user, words), "reference": reference()}
    texts = {"ignored": "hey can you pass me that"} if action == "ignore" else {}
    if action == "backchannel":
        clips["backchannel"] = (cat(gap(0.05), tone(0.4, 440.0), gap(0.05)),
                                (Word(0.05, 0.45, "mm-hmm"),))
    return make_instance(tmp, action, condition, clips, ann, texts)


def simulator_instance(tmp: Path, action: str, condition: str, ref_s: float = 4.0,
                       cue_s: float = 1.5) -> Instance:
    """Lead-in speech 0.3-2.3 s; cue speech at 0.1 s into its clip, ``cue_s`` long."""
    clips = {
        "lead_in": (cat(gap(0.3), tone(2.0), gap(0.2)),
                    spread("can you tell me about the museum", 0.3, 2.3)),
        "reference": reference(ref_s),
        "cue": (cat(gap(0.1), tone(cue_s, 262.0), gap(0.2)),
                spread("wait hold on a second", 0.1, 0.1 + cue_s)),
    }
    if action == "recover":
        clips["recovery"] = (cat(gap(0.05), tone(2.0, 392.0), gap(0.05)),
                             spread("sure in short it opens at nine", 0.05, 2.05))
    return make_instance(tmp, action, condition, clips, {"cue_start": 0.1, "cue_end": 0.1 + cue_s})


def run(coro):
    return asyncio.run(coro)


def spans(samples: np.ndarray) -> list[tuple[float, float]]:
    """Energy speech stretches of a recorded track (the tests' stand-in for the VAD)."""
    return speech_spans(samples, SR)


def speaking_at(samples: np.ndarray, t: float) -> bool:
    return any(a <= t < b for a, b in spans(samples))


def speech_in(samples: np.ndarray, lo: float, hi: float) -> float:
    """Seconds of speech inside [lo, hi]."""
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans(samples))


class ScriptedModel:
    """A stepped test model: a tone during each (start, end) of ``script`` (seconds on its
    clock), plus optional native words (absolute times) emitted in the frame they start in."""

    name = "scripted"

    def __init__(self, script=(), words=(), sample_rate: int = SR, frame_size: int = 320,
                 level_db: float = -20.0):
        self.script = list(script)
        self.words = list(words)
        self.sample_rate, self.frame_size = sample_rate, frame_size
        self.amp = 10 ** (level_db / 20) * np.sqrt(2)
        self.started = self.finished = 0
        self.frames: list[int] = []

    def start(self, info) -> None:
        self.started += 1
        self.k = 0

    def step(self, frame):
        from pytest_duplexact.models.contract import StepOutput

        self.frames.append(len(frame))
        f0 = self.k * self.frame_size
        t = (f0 + np.arange(self.frame_size)) / self.sample_rate
        on = np.zeros(self.frame_size, dtype=bool)
        for a, b in self.script:
            on |= (t >= a) & (t < b)
        out = np.where(on, self.amp * np.sin(2 * np.pi * 200.0 * t), 0.0).astype(np.float32)
        t0, t1 = f0 / self.sample_rate, (f0 + self.frame_size) / self.sample_rate
        ws = [Word(w.start - t0, w.end - t0, w.text) for w in self.words if t0 <= w.start < t1]
        self.k += 1
        return StepOutput(out, ws)

    def finish(self) -> None:
        self.finished += 1


def timeline_of(rec, merge_gap: float = 0.3):
    """A stand-in for segmentation.py: energy speech spans (raw, 0.1 s hangover) merged across
    gaps < ``merge_gap``, each with the native words that start inside it."""
    from pytest_duplexact.data.timeline import Segment, Span, Timeline

    raw = speech_spans(rec.output, SR, hangover_s=0.1)
    merged: list[list[float]] = []
    for a, b in raw:
        if merged and a - merged[-1][1] < merge_gap:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    segs = []
    for a, b in merged:
        text = " ".join(w.text for w in rec.transcript if a - 0.1 <= w.start < b)
        segs.append(Segment(a, b, text))
    return Timeline(tuple(segs), rec.duration, speech=tuple(Span(a, b) for a, b in raw),
                    cue=rec.cue, user_sent_until=rec.user_sent_until,
                    events=tuple(rec.events))


def instance_for(tmp: Path, condition) -> Instance:
    """A hand-made instance of any taxonomy condition."""
    from pytest_duplexact.data.taxonomy import Pipeline

    if condition.pipeline is Pipeline.SIMULATOR:
        return simulator_instance(tmp, condition.action, condition.id)
    return direct_instance(tmp, condition.action, condition.id)
