"""The model interface: how a full-duplex model plugs into the harness (docs/models.md).

Two kinds, matching how such models really run:

* ``SteppedModel`` (frame-stepped, e.g. Moshi-style): the harness feeds one input frame and
  gets the output frame for the same instant back; runs as fast as the model computes.
* ``StreamingModel`` (e.g. hosted realtime APIs): an async session fed at wall-clock pace;
  the adapter reports the provider's events (the session protocol: ``models/streaming_contract.py``)
  and the harness turns them into what a listener would hear and when (the playback clock:
  ``pipelines/streaming_duplex.py``).

A model declares its own sample rate (and frame size); the harness resamples. Either kind may
supply a native, time-aligned transcript of its own speech.

What else a model may declare (its name, the pipelines it runs, its server's concurrency, ...)
is ``DuplexModel``, each declaration with its default; a plain model declaring any of them is
read through the one-declaration protocols below it, so neither needs the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

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
    the start of this frame (they may run into later frames); the duplex places them on the
    model's sample grid, so the same instant reached from two frames is one time."""

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
class Batched(Protocol):
    """The batched contract's calls (``BatchedSteppedModel`` says what they do)."""

    def open_batch(self, size: int) -> None: ...

    def start_slot(self, slot: int, info: SessionInfo) -> None: ...

    def step_batch(self, frames: Mapping[int, np.ndarray]
                   ) -> Mapping[int, "StepOutput | np.ndarray | Exception"]: ...

    def finish_slot(self, slot: int) -> None: ...


@runtime_checkable
class BatchedSteppedModel(SteppedModel, Batched, Protocol):
    """Optional beside ``SteppedModel``: many trials share each model call
    (``--duplexact-batch=B``, docs/runs.md). The harness calls ``open_batch(B)`` once, then
    ``start_slot(slot, info)`` when a trial takes slot 0..B-1, ``step_batch`` once per frame
    of the lockstep with one input frame per stepped slot (``{slot: frame}``; the answer maps
    the same slots to what ``step`` would return, or to an Exception: that trial's error
    alone), and ``finish_slot(slot)`` when the trial ends.

    ``slots_reset_alone``: True when one slot can start while the others run (a finished slot
    takes the next trial at once; idle slots are left out of ``step_batch``). False: the
    harness runs waves: up to B trials start together, a finished slot is fed silence (its
    answer discarded) until every trial of the wave has ended, and only then does the next
    wave start."""

    slots_reset_alone: bool


@runtime_checkable
class StreamingModel(Protocol):
    """The session protocol is in ``models/streaming_contract.py``; the playback clock, in
    ``pipelines/streaming_duplex.py``."""

    input_sample_rate: int
    output_sample_rate: int

    async def connect(self, info: SessionInfo): ...


class DuplexModel:
    """What a model may declare beyond its stepped or streaming protocol, each with its
    default. Every built-in derives from it; a user's model may, or may be a plain class
    declaring any of these itself (docs/models.md): ``models.adapter.traits`` reads both
    alike, through the one-declaration protocols below, and takes what a plain model leaves
    out from here."""

    name: str = ""  # how messages name the model ("": its class's name)
    pipelines: tuple[str, ...] | None = None  # the pipelines it runs (None: all of them)
    max_concurrency: int | None = None  # trials at once its server takes (None: no cap)
    retries_transient: bool = False  # a stepped model across a network: a transient failure
    # runs the trial again, as a streaming model's does
    slots_reset_alone: bool = False  # batched: a slot starts while the others run
    chunk_ms: float | None = None  # a streaming model's input chunk (None: DEFAULT_CHUNK_MS)

    def unsupported(self, pipeline: str) -> str | None:
        """Why this model cannot run ``pipeline`` (None: it can). By default what
        ``pipelines`` says; a model whose support depends on its server says why itself."""
        return pipeline_refusal(self.name or type(self).__name__, self.pipelines, pipeline)


def pipeline_refusal(name: str, pipelines: tuple[str, ...] | None, pipeline: str) -> str | None:
    """Why a model named ``name`` that runs only ``pipelines`` cannot run ``pipeline``."""
    if not pipelines or pipeline in pipelines:
        return None
    return (f"unsupported by this model: {name} runs only on "
            f"{', '.join(pipelines)} replay, not {pipeline}")


# One protocol per optional declaration: what a model that does not derive from DuplexModel
# may declare, one at a time (a DuplexModel has each of them). A method set to None is not
# declared, as typing's runtime protocols hold.

@runtime_checkable
class Named(Protocol):
    name: str


@runtime_checkable
class Pipelined(Protocol):
    pipelines: tuple[str, ...] | None


@runtime_checkable
class Refusing(Protocol):
    def unsupported(self, pipeline: str) -> str | None: ...


@runtime_checkable
class Capped(Protocol):
    max_concurrency: int | None


@runtime_checkable
class RetryingTransient(Protocol):
    retries_transient: bool


@runtime_checkable
class ResettingSlotsAlone(Protocol):
    slots_reset_alone: bool


@runtime_checkable
class Chunked(Protocol):
    chunk_ms: float | None


# The structural parts, read one at a time: the stepped and streaming protocols above need all
# their members, and what the run asks (is there a ``step``? an ``async connect``?) needs one.

@runtime_checkable
class Stepping(Protocol):
    def step(self, frame: np.ndarray) -> StepOutput | np.ndarray: ...


@runtime_checkable
class SteppingMany(Protocol):
    """``step_many(frames)``: n consecutive input frames in one call (docs/models.md)."""

    def step_many(self, frames: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class SampleRated(Protocol):
    sample_rate: int


@runtime_checkable
class Framed(Protocol):
    frame_size: int


@runtime_checkable
class Connecting(Protocol):
    def connect(self, info: SessionInfo) -> Any: ...


@runtime_checkable
class Recorded(Protocol):
    """Returns stored trials instead of running (models/providers/recorded.py)."""

    def recording_for(self, instance: Instance) -> Any: ...


@dataclass(frozen=True)
class Probed:
    """What a model's server said when the run's preflight connected to it once (a factory's
    ``probe(**options)``; pytest_plugin/preflight.py): the served model's own name (empty when
    it gives none), a one-line description, and how many trials it runs at once (None:
    unknown). run.json and the report record the first two (``settings.served``)."""

    description: str
    model: str = ""
    max_sessions: int | None = None
    where: str = ""  # the server, as it may be shown (credentials masked)
    mode: str | None = None  # "stepped" | "streaming" when the server says (a bridge's READY)


class ModelError(RuntimeError):
    """The model (or its adapter) failed: the instance is an *error*, never a miss."""
