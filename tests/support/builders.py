"""The tests' shared builders of package data, one of each: timed words, segments, timelines,
hand-made instances and a user clip of real speech. A folder's own shapes built on these (the pipelines' tone
instances, the judges' clip-less trials, the rules' word-counted segments) live in its
helper module."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

import pytest_duplexact
from pytest_duplexact.data import audio
from pytest_duplexact.data.annotations import Annotations, Clip, Instance
from pytest_duplexact.data.timeline import Cue, Segment, Span, Timeline, Word

# the roles whose words are the instance's text of that role (the judges and the simulator
# read texts, the pipelines play clips)
SPEECH_ROLES = ("user", "cue", "reference", "backchannel", "recovery")


def words(*items: tuple[str, float, float]) -> tuple[Word, ...]:
    """Timed words from (text, start, end) triples."""
    return tuple(Word(s, e, t) for t, s, e in items)


def spread(text: str, start: float, end: float) -> tuple[Word, ...]:
    """The words of ``text`` in equal slices of [start, end]."""
    toks = text.split()
    step = (end - start) / len(toks)
    return tuple(Word(start + i * step, start + (i + 1) * step, w) for i, w in enumerate(toks))


def seg(start: float, end: float, text: str | None) -> Segment:
    return Segment(start, end, text)


def timeline(*segments: Segment, duration: float = 60.0, speech=None, cue=None,
             user_sent_until=None) -> Timeline:
    """A timeline of ``segments``; ``cue`` and ``speech`` may be given as plain pairs."""
    if cue is not None and not isinstance(cue, Cue):
        cue = Cue(*cue)
    if speech is not None:
        speech = tuple(s if isinstance(s, Span) else Span(*s) for s in speech)
    return Timeline(tuple(segments), duration, speech=speech, cue=cue,
                    user_sent_until=user_sent_until)


def make_instance(tmp: Path | None, action: str, condition: str, clips: dict,
                  ann: dict | None = None, texts: dict | None = None, *, iid: str | None = None,
                  scenario: str = "casual", source: str = "synthesized",
                  manifest: Path | None = None, line: int | None = None) -> Instance:
    """An instance by hand (id ``action-condition`` unless ``iid``). ``clips``: role -> a
    Clip, taken as it is, or samples or (samples, words), written as FLAC under
    ``tmp/<iid>/``; a written speech clip's words are its role's text unless ``texts`` has
    one."""
    iid = iid or f"{action}-{condition}"
    made, written = {}, []
    for role, spec in clips.items():
        if isinstance(spec, Clip):
            made[role] = spec
            continue
        samples, spoken = spec if isinstance(spec, tuple) else (spec, ())
        path = Path(tmp) / iid / f"{role}.flac"
        audio.write(path, samples)
        made[role] = Clip(path, len(samples) / audio.SAMPLE_RATE, tuple(spoken))
        written.append(role)
    texts = dict(texts or {})
    for role in written:
        if made[role].transcript and role in SPEECH_ROLES:
            texts.setdefault(role, made[role].text)
    return Instance(iid, action, condition, scenario, source, Annotations(**(ann or {})), made,
                    texts, manifest=manifest, line=line)


@cache
def bundled_speech() -> np.ndarray:
    """The endpoint model's bundled reply (models/assets/response.flac), 16 kHz: real speech,
    which a VAD hears as speech."""
    return audio.read(Path(pytest_duplexact.__file__).parent / "models" / "assets"
                      / "response.flac")


def speech_clip(start: float, seconds: float, total: float) -> np.ndarray:
    """``total`` seconds of 16 kHz input: the first ``seconds`` of the bundled speech from
    ``start``, silence elsewhere."""
    x = np.zeros(int(total * audio.SAMPLE_RATE), np.float32)
    piece = bundled_speech()[: int(seconds * audio.SAMPLE_RATE)]
    a = int(start * audio.SAMPLE_RATE)
    x[a:a + len(piece)] = piece
    return x
