"""An instance of the benchmark as plain data: its annotations, clips and texts
(docs/dataset-format.md). Loading and checking a dataset is instance.py's; this module imports
no audio library, so the rules and everything else that only reads instances stay light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import taxonomy
from .timeline import Span, Word


@dataclass(frozen=True)
class Clip:
    """One audio file of an instance, with its timed transcript (times on the clip's clock)."""

    path: Path
    duration: float
    transcript: tuple[Word, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.transcript)

    def load(self):
        from . import audio  # soundfile: only where audio is actually read

        return audio.read(self.path)


@dataclass(frozen=True)
class Annotations:
    """The annotated instants of an instance, in seconds (clocks: Requirements)."""

    user_start: float | None = None
    user_end: float | None = None
    pause_start: float | None = None
    pause_end: float | None = None
    other_start: float | None = None
    other_end: float | None = None
    interrupt_target: float | None = None
    backchannel_point: float | None = None
    cue_start: float | None = None
    cue_end: float | None = None

    @property
    def user(self) -> Span:
        return Span(self.user_start, self.user_end)

    @property
    def pause(self) -> Span:
        return Span(self.pause_start, self.pause_end)

    @property
    def other(self) -> Span:
        return Span(self.other_start, self.other_end)


@dataclass(frozen=True)
class Requirements:
    """What an instance of one condition must carry (docs/dataset-format.md): each action's
    rule says it (``requires`` in rules/<action>.py) and the loader (instance.py) is given it.
    Clip times are on the user clip's clock except ``cue_start`` / ``cue_end`` (the cue
    clip's).

    ``within_user``: (first, last, message) annotation pairs that must lie inside
    [user_start, user_end]; ``message`` is the problem reported on ``first``."""

    clips: tuple[str, ...]
    annotations: tuple[str, ...]
    texts: tuple[str, ...]
    within_user: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Instance:
    id: str
    action: str
    condition: str
    scenario: str
    source: str
    annotations: Annotations
    clips: dict[str, Clip]
    texts: dict[str, str]
    manifest: Path | None = None
    line: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    corpus: str | None = None  # optional: AMI, CORAAL, Loqui, synthesized, Candor

    @property
    def cond(self) -> taxonomy.Condition:
        return taxonomy.condition(self.action, self.condition)

    @property
    def pipeline(self) -> taxonomy.Pipeline:
        return self.cond.pipeline

    def clip(self, role: str) -> Clip:
        return self.clips[role]

    def text(self, name: str, default: str = "") -> str:
        return self.texts.get(name) or default
