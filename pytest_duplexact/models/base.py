"""The model interface: how a full-duplex model plugs into the harness (docs/models.md).

Two kinds, matching how such models really run:

* ``SteppedModel`` (frame-stepped, e.g. Moshi-style): the harness feeds one input frame and
  gets the output frame for the same instant back; runs as fast as the model computes.
* ``StreamingModel`` (e.g. hosted realtime APIs): an async session fed at wall-clock pace;
  the adapter reports what a listener would hear and when (see ``models/streaming.py``).

A model declares its own sample rate (and frame size); the harness resamples. Either kind may
supply a native, time-aligned transcript of its own speech.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ..data.annotations import Instance  # the plain type: no audio library imported
from ..data.timeline import Word


@dataclass(frozen=True)
class SessionInfo:
    """Given to a model at the start of each instance.

    ``instance`` is the full benchmark instance. Only privileged reference models (the built-in
    ``oracle``) may read its annotations and reference clips; a model under test must behave
    as if it only heard the audio."""

    instance: Instance
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepOutput:
    """A stepped model's answer to one input frame.

    ``audio``: exactly one output frame (``frame_size`` samples at the model's rate);
    ``transcript``: words whose audio starts in this frame, with times in seconds relative to
    the start of this frame (they may run into later frames)."""

    audio: np.ndarray
    transcript: Sequence[Word] = ()


@runtime_checkable
class SteppedModel(Protocol):
    sample_rate: int
    frame_size: int

    def start(self, info: SessionInfo) -> None: ...

    def step(self, frame: np.ndarray) -> StepOutput | np.ndarray: ...

    def finish(self) -> None: ...


@runtime_checkable
class StreamingModel(Protocol):
    """See ``models/streaming.py`` for the session protocol and the playback clock."""

    input_sample_rate: int
    output_sample_rate: int

    async def connect(self, info: SessionInfo): ...


class ModelError(RuntimeError):
    """The model (or its adapter) failed: the instance is an *error*, never a miss."""
