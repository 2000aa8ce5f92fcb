"""Deadlines on the model under test (``--duplexact-timeout``): no trial can hang a run.

A trial runs on its own event loop in a worker thread while the test's thread watches it. The
duplex sessions ``beat()`` whenever the model answers (a stepped frame, a streaming chunk sent
or event received); when no beat comes for ``timeout`` seconds the trial is an error naming
the instance and the call the model is stuck in (read off the worker's stack, or the await
chain when it idles in its event loop). The stuck thread is abandoned (a daemon: it cannot
keep the process alive) after its task is cancelled, which frees a streaming connection, and
it is flagged: if the model's call ever returns, the session raises TrialAbandoned and the
thread unwinds without calling the model again. Ctrl-C ends the running trial the same way
before it propagates, also one a callback swallowed (``interrupt.check`` at each poll).

The deadline is on *progress*, not on the whole trial: a slow model that keeps answering is
never cut, however long its instance is; a call that never returns always is. Time the trial
waits to be admitted by a busy server (``models.streaming.admitting``: its queue, "no workers
available") is not the model's silence: it is bounded by the adapter's own deadline
(``ready_timeout``, ``queue_timeout``) and reported apart, never charged to this one. Nor is
the harness's own wait (``harness_waiting``: the backoff between a trial's attempts, bounded by
its retry policy): the model's deadline starts again when it ends, so a model that fails fast
is reported for its own error once the attempts run out, not for a timeout.

A model that raises ``SystemExit`` (or another ``BaseException`` but KeyboardInterrupt) is
contained here too: it becomes that instance's ModelError instead of ending the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import sys
import threading
import time
from types import FrameType
from typing import Any, Awaitable, Callable, Iterator, TypeVar

from ..models.contract import ModelError
from ..models.streaming_contract import ADMISSION, Admission
from . import interrupt

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0  # seconds without any answer from the model
_GRACE = 2.0  # for a cancelled trial to release its session before it is abandoned
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_STDLIB = os.path.dirname(os.__file__)


class ModelTimeout(ModelError):
    """The model stopped answering: a call into it did not return within the deadline."""


class Watch:
    """Progress of one trial: ``beats`` grows whenever the model answers. ``abandoned`` is set
    when the watcher gives up on the trial (deadline, Ctrl-C): the session then raises
    TrialAbandoned the next time the model returns control, never calling into it again."""

    __slots__ = ("beats", "abandoned", "admission", "harness_waits")

    def __init__(self) -> None:
        self.beats = 0
        self.abandoned = False
        self.admission = Admission()  # waits to be admitted: not silence (module doc)
        self.harness_waits = 0  # the harness's own waits in progress: not silence either


class TrialAbandoned(BaseException):
    """Raised inside a trial the watcher gave up on, so its thread unwinds (freeing what it
    holds: sockets, soxr's resamplers) without touching the model, which the next instance
    may already be using. A BaseException: no ``except Exception`` turns it into a result."""


_WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("duplexact_watch",
                                                                       default=None)
_UNWATCHED = Watch()  # beats nobody reads: sessions run outside a watch (unit tests)


def current() -> Watch:
    """The running trial's Watch (sessions keep it and bump ``beats`` in their hot loops)."""
    return _WATCH.get() or _UNWATCHED


def beat() -> None:
    current().beats += 1


@contextlib.contextmanager
def harness_waiting() -> Iterator[None]:
    """The body is the harness's own wait, bounded by the harness (the backoff between a
    trial's attempts): not the model's silence. The model's deadline starts again after it."""
    watch = current()
    watch.harness_waits += 1
    try:
        yield
    finally:
        watch.harness_waits -= 1
        watch.beats += 1  # a wait shorter than one poll still restarts the model's deadline


def contain(exc: BaseException, what: str) -> BaseException:
    """What a trial's exception becomes: KeyboardInterrupt and ordinary exceptions as they
    are; SystemExit, GeneratorExit, a stray CancelledError... as a ModelError of the instance."""
    if isinstance(exc, (Exception, KeyboardInterrupt)):
        return exc
    err = ModelError(f"{what}: the model raised {type(exc).__name__}"
                     f"{'(' + str(exc) + ')' if str(exc) else ''}; contained to this instance")
    err.__cause__ = exc
    return err


# --- where a trial is stuck ----------------------------------------------------------------

def _ours(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_PACKAGE)


def _library(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(_STDLIB) or "site-packages" in name or name.startswith("<")


def _label(frame: FrameType) -> str:
    code = frame.f_code
    path = code.co_filename
    if path.startswith(_PACKAGE):
        path = os.path.relpath(path, os.path.dirname(_PACKAGE))
    return f"{getattr(code, 'co_qualname', code.co_name)} ({path}:{frame.f_lineno})"


def _stack(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out  # innermost first


def _await_chain(task: asyncio.Task | None) -> list[FrameType]:
    out = []
    coro: Any = task.get_coro() if task is not None else None
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        out.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out[::-1]  # innermost first


def describe(frames: list[FrameType]) -> str:
    """The call the trial is stuck in: the frame our code called into (the model or its
    adapter's library), with the innermost frame when that is deeper still."""
    if not frames:
        return "an unknown place"
    outer = next((i for i, f in enumerate(frames) if _ours(f)), None)
    if outer is None:
        return _label(frames[0])
    if outer == 0:  # stuck in our own code (e.g. a stepped model's C call shows no frame)
        return _label(frames[0])
    callee = frames[outer - 1]
    where = f"{_label(callee)}, called from {_label(frames[outer])}"
    inner = next((f for f in frames[: outer - 1] if not _library(f)), None)
    if inner is not None and inner is not callee:
        where = f"{_label(inner)} in {where}"
    return where


def _idle_in_loop(frames: list[FrameType]) -> bool:
    return any(f.f_code.co_name == "_run_once" for f in frames[:6])


# --- running a trial under the watch -------------------------------------------------------

def _stop(watch: Watch, box: dict, done: threading.Event, *, wait: bool) -> None:
    """Give up on a trial: flag it (a stepped session raises TrialAbandoned when the model's
    call returns) and cancel its task (a streaming session closes its connection; cancelling
    is safe whether its loop is idle or busy). With ``wait``, give it up to _GRACE to unwind.
    A thread blocked in C stays blocked until that call returns, and then unwinds."""
    watch.abandoned = True
    loop, task = box.get("loop"), box.get("task")
    if loop is not None and task is not None:
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # the loop already closed
            pass
    if wait:
        done.wait(_GRACE)


class _Progress:
    """How long the model has been silent, read off its Watch's beats at each poll (both
    watchers poll; only the clock differs)."""

    def __init__(self, watch: Watch, now: float) -> None:
        self.watch, self.last, self.since = watch, -1, now

    def silent_for(self, now: float) -> float:
        watch = self.watch
        if watch.beats != self.last or watch.admission.waiting or watch.harness_waits:
            self.last, self.since = watch.beats, now
        return now - self.since


def _poll(timeout: float, poll: float | None) -> float:
    return poll if poll is not None else min(0.25, max(timeout / 10, 0.01))


def _timed_out(what: str, timeout: float, where: str) -> ModelTimeout:
    return ModelTimeout(f"{what}: the model did not answer for {timeout:g} s "
                        f"(--duplexact-timeout); waiting in {where}")


def run_watched(trial: Callable[[], Awaitable[T]], *, timeout: float, what: str,
                poll: float | None = None) -> T:
    """``asyncio.run(trial())`` in a worker thread, watched from this one (see module doc).
    Raises ModelTimeout when the model makes no progress for ``timeout`` seconds."""
    watch = Watch()
    box: dict[str, Any] = {}
    done = threading.Event()

    async def main():
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        _WATCH.set(watch)
        ADMISSION.set(watch.admission)
        return await trial()

    def work():
        try:
            box["value"] = asyncio.run(main())
        except BaseException as e:  # handed over to the watching thread
            box["error"] = e
        finally:
            done.set()

    worker = threading.Thread(target=work, name=f"duplexact-trial {what}", daemon=True)
    worker.start()
    poll, progress = _poll(timeout, poll), _Progress(watch, time.monotonic())
    try:
        while not done.wait(poll):
            interrupt.check()  # a Ctrl-C a callback swallowed still ends the trial
            if progress.silent_for(time.monotonic()) < timeout:
                continue
            frames = _stack(sys._current_frames().get(worker.ident))
            idle = _idle_in_loop(frames)
            where = describe(_await_chain(box.get("task")) if idle else frames)
            # an idle loop gets the grace to close its connection; a blocked call, none
            _stop(watch, box, done, wait=idle)
            raise _timed_out(what, timeout, where)
        # a trial shorter than one poll never reached the check above: a Ctrl-C swallowed
        # during it (seen: in soundfile's cffi callback) would let the run go on to the end
        interrupt.check()
    except KeyboardInterrupt:
        # Ctrl-C: end the trial too, so its thread lets go of what it holds (sockets, soxr's
        # resamplers) before the interpreter exits, rather than dying with them at exit
        # (which makes nanobind print a page of "leaked instance" lines).
        _stop(watch, box, done, wait=True)
        raise
    if "error" in box:
        raise contain(box["error"], what)
    return box["value"]


async def watch_async(trial: Callable[[], Awaitable[T]], *, timeout: float, what: str,
                      poll: float | None = None) -> T:
    """The same deadline for a trial that shares an event loop with others (prefetched
    streaming sessions): a stalled trial's task is cancelled; the others go on."""
    watch = Watch()

    async def watched():
        _WATCH.set(watch)
        ADMISSION.set(watch.admission)
        return await trial()

    task = asyncio.ensure_future(watched())
    loop = asyncio.get_running_loop()
    poll, progress = _poll(timeout, poll), _Progress(watch, loop.time())
    while True:
        try:
            finished, _ = await asyncio.wait({task}, timeout=poll)
        except asyncio.CancelledError:  # the caller gave up on the trial: so does its task
            task.cancel()
            raise
        if finished:
            break
        if progress.silent_for(loop.time()) >= timeout:
            where = describe(_await_chain(task))
            watch.abandoned = True
            task.cancel()
            await asyncio.wait({task}, timeout=_GRACE)
            raise _timed_out(what, timeout, where)
    try:
        return task.result()
    except BaseException as e:
        raise contain(e, what)
