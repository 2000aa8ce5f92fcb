"""The streaming adapter contract (docs/writing-an-adapter.md): what a hosted realtime model's
session yields and must do. Everything about *time* (wall-clock input, 1x playback, barge-in
truncation, the transcript aligned to playback, retries) lives in pipelines/streaming_duplex.py,
once, for every hosted model; an adapter only speaks its provider's protocol.

Session protocol (what ``await model.connect(info)`` returns)::

    class StreamingSession(Protocol):
        async def send(self, pcm: np.ndarray) -> None      # float32 mono at input_sample_rate
        def events(self) -> AsyncIterator[Event]            # ends only when the session ends
        async def truncate(self, item_id: str, audio_end_ms: int) -> None
        async def close(self) -> None

A session may also have ``usage``: a flat dict of numbers its provider reported (tokens,
audio seconds), read at ``close()`` into ``Recording.usage`` and totalled by data/usage.py;
and ``attach_playback(played_ms)``: the duplex then hands it ``played_ms(item_id) -> int``,
the milliseconds of that item a listener has heard by now on the playback clock (for a
protocol that reports playback back to its server, as vllm_omni.py does).

A session whose send has nothing to wait for while its socket has room may have
``send_nowait(pcm) -> bool``: the duplex then sends each chunk from the loop's send clock
itself (pipelines/pacing.py), with no task woken per chunk. True: sent; False: nothing was
sent or counted, and the duplex awaits ``send(pcm)`` for that chunk instead. It raises as
``send`` does and never blocks. ``input_pcm16 = True`` on a session that sends 16-bit PCM
hands ``send`` / ``send_nowait`` int16 samples, converted once per push (models/util/pcm.py).

A model whose server makes a session wait its turn (one lock, a worker pool, a held-back
READY) wraps that wait, bounded by its own deadline, in ``admitting()``: it is then not taken
for a hung model (``--duplexact-timeout``) and is reported apart (``Admission``).

``events()`` yields ``AudioDelta`` / ``TranscriptDelta`` / ``SpeechStarted`` / ``ItemDone`` /
``ResponseDone`` / ``Error`` / ``Note``. An adapter raises ``TransientModelError`` (retried
from scratch) or ``ModelError`` (final) for failures; an ``events()`` that ends before ``close()`` means the
provider dropped the session, which is a transient failure of that instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Iterator,
    Protocol,
    Sequence,
    Union,
    runtime_checkable,
)

from .contract import ModelError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import numpy as np

DEFAULT_CHUNK_MS = 20  # the input chunk the streaming duplex sends (adapters may use it)


class TransientModelError(ModelError):
    """A failure worth retrying the whole instance for: rate limit, refused or dropped
    connection. Still a ``ModelError`` (an error, never a miss) once retries run out."""


class ServerUnreachable(TransientModelError):
    """No connection to the model's server at all (refused, timed out, reset before the
    handshake): retried like any transient failure; several instances in a row ending so
    mean the server is gone, and the run stops (pytest_plugin/session.py)."""


# --- session events ----------------------------------------------------------------------

@dataclass(frozen=True)
class AudioDelta:
    """Model audio, float32 mono at the model's output rate, belonging to one output item."""

    item_id: str
    audio: np.ndarray


@dataclass(frozen=True)
class TranscriptDelta:
    """Text of the model's speech in ``item_id`` (the provider's streaming transcript)."""

    item_id: str
    text: str


@dataclass(frozen=True)
class SpeechStarted:
    """The provider's turn detection heard the user start speaking. With ``interrupt`` the
    provider cancels its response, so a client stops playback now (barge-in)."""

    interrupt: bool = True


@dataclass(frozen=True)
class ItemDone:
    """No more audio or text will arrive for this item."""

    item_id: str


@dataclass(frozen=True)
class ResponseDone:
    """A response finished (``status``: completed, cancelled, failed, incomplete); every item
    seen so far is complete."""

    status: str = "completed"


@dataclass(frozen=True)
class Error:
    """A provider error event. ``fatal`` ends the instance (``transient``: retry it)."""

    message: str
    code: str | None = None
    fatal: bool = False
    transient: bool = False


@dataclass(frozen=True)
class Note:
    """Something the provider decided that a reader of the recording should see (a listen
    decision, an overlap decision): kept in ``Recording.events`` at its arrival, no effect."""

    text: str


Event = Union[AudioDelta, TranscriptDelta, SpeechStarted, ItemDone, ResponseDone, Error, Note]


@runtime_checkable
class StreamingSession(Protocol):
    async def send(self, pcm: np.ndarray) -> None: ...

    def events(self) -> AsyncIterator[Event]: ...

    async def truncate(self, item_id: str, audio_end_ms: int) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A session that says what it cost: a flat dict of numbers, read at ``close()``."""

    usage: dict[str, int | float]


@runtime_checkable
class ReportsPlayback(Protocol):
    """A session that tells its server how much of each answer was heard: it is handed
    ``played_ms(item_id) -> int`` when the trial starts."""

    def attach_playback(self, played_ms: Callable[[str], int]) -> None: ...


class Chunker:
    """Collects the duplex's wall-clock pieces (``DEFAULT_CHUNK_MS``) into whole chunks of
    ``size`` samples for a protocol that takes fixed steps; ``push`` returns the chunks now
    complete, each due the moment its last piece arrived."""

    def __init__(self, size: int):
        import numpy as np

        self._np, self.size = np, size
        self._pending: list = []
        self._n = 0

    def push(self, pcm: "np.ndarray") -> list["np.ndarray"]:
        np = self._np
        self._pending.append(np.asarray(pcm, dtype=np.float32))
        self._n += len(pcm)
        out = []
        while self._n >= self.size:
            x = np.concatenate(self._pending)
            out.append(x[: self.size])
            rest = x[self.size:]
            self._pending, self._n = [rest], len(rest)
        return out


class Admission:
    """A trial's waits to be admitted by a busy server (its queue, "no workers available", a
    READY that a one-session server holds back): an adapter wraps each in ``admitting()``
    and bounds it by its own deadline (``ready_timeout``, ``queue_timeout``). That time is not
    the model's: the run's watchdog (``--duplexact-timeout``) does not count it as silence,
    and the streaming duplex reports it apart (the trial's ``clock``, ``admission_ms``)."""

    __slots__ = ("waiting", "seconds")

    def __init__(self) -> None:
        self.waiting = 0      # admissions in progress (nested waits count once each)
        self.seconds = 0.0    # their total so far


#: the running trial's admission record, set by the watchdog for the trial's context
ADMISSION: contextvars.ContextVar[Admission | None] = contextvars.ContextVar(
    "duplexact_admission", default=None)


@contextlib.contextmanager
def admitting() -> Iterator[None]:
    """The body is a wait to be admitted (see ``Admission``); outside a watched trial, a
    no-op."""
    record = ADMISSION.get()
    if record is None:
        yield
        return
    record.waiting += 1
    t0 = time.monotonic()
    try:
        yield
    finally:
        record.waiting -= 1
        record.seconds += time.monotonic() - t0


class EventRate:
    """Counts a server's messages per one-second window: ``over(now)`` is true once more than
    ``limit`` arrived within one (a flood is the server's fault, reported as such, before it
    starves the event loop every session's timing shares)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._start: float | None = None
        self._n = 0

    def over(self, now: float) -> bool:
        if self._start is None or now - self._start >= 1.0:
            self._start, self._n = now, 0
        self._n += 1
        return self._n > self.limit


async def stop_and_close(ws: Any, stop: Any, is_last: Callable[[Any], bool], timeout: float,
                         label: str) -> None:
    """End a WebSocket session politely: send ``stop``, read until ``is_last(message)`` (the
    server's acknowledgement; results still in flight are dropped), then close the socket.
    Each part gets ``timeout``: a dead or silent server must not hold the instance."""
    try:
        await asyncio.wait_for(ws.send(stop), timeout)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            if is_last(await asyncio.wait_for(ws.recv(), end - loop.time())):
                break
    except Exception as e:
        log.debug("%s: stopping the session failed: %s", label, e)
    try:
        await asyncio.wait_for(ws.close(), timeout)
    except Exception as e:
        log.debug("%s: closing the socket failed: %s", label, e)


__all__: Sequence[str] = [
    "AudioDelta", "TranscriptDelta", "SpeechStarted", "ItemDone", "ResponseDone", "Error",
    "Note", "Event", "StreamingSession", "ReportsUsage", "ReportsPlayback",
    "TransientModelError", "ServerUnreachable",
    "ModelError", "DEFAULT_CHUNK_MS",
    "Admission", "ADMISSION", "admitting", "Chunker", "EventRate", "stop_and_close",
]
