"""Batched stepping (``--duplexact-batch=B``): up to B stepped trials in lockstep on one event
loop, sharing each model call (``BatchedSteppedModel.step_batch``, models/base.py).

Each trial runs its own pipeline (Direct, Simulator or barge-in: its own policy, playback
and cue logic) against a ``BatchedDuplex``. Its ``push`` resamples and frames the input like
``SteppedDuplex`` and then waits; once every running trial is waiting, the ``Batcher`` steps
them together, one frame per trial per ``step_batch`` call, until some trial's pushed frames
are used up; that trial then runs on (decides, pushes again) while the others wait for it.
Nothing happens between two pushes of a stepped session, so a trial's recording is exactly
what it would be alone, for a model whose slots are independent.

Slots: a model whose ``slots_reset_alone`` is true gets a finished slot's next trial at once
(idle slots are left out of the call). Otherwise the trials run in waves: the trials that hold
a slot at the first step of a wave are its members; a member that has finished is fed silence
(its answer discarded) until all have, and only then may new trials take the slots.

Failures stay with their trial: an exception in one slot's answer, or a bad answer, is that
instance's ModelError; only a ``step_batch`` call that raises fails every trial in it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Mapping

import numpy as np

from ..models.adapter import traits
from ..models.contract import ModelError, SessionInfo
from . import watchdog
from .stepped import SteppedDuplex, model_name


class _Slot:
    __slots__ = ("duplex", "frames", "pos", "done")

    def __init__(self, duplex: "BatchedDuplex"):
        self.duplex = duplex
        self.frames: np.ndarray | None = None  # frames pushed and not yet stepped
        self.pos = 0
        self.done: asyncio.Future | None = None

    def settle(self, error: BaseException | None = None) -> None:
        done, self.frames, self.done = self.done, None, None
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)


class Batcher:
    """The lockstep of up to ``size`` trials on one model; lives on one event loop."""

    def __init__(self, model, size: int):
        if size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.model, self.size = model, size
        self.reset_alone = traits(model).slots_reset_alone
        self.progress = watchdog.Watch()  # beats once per model call (the runner's deadline)
        self.abandoned = False  # the runner gave up on this lockstep (a model call hung)
        self._opened = False
        self._free = list(range(size))
        self._trials: dict[int, _Slot | None] = {}  # slot -> its trial (None until it opens)
        self._wave: set[int] = set()  # waves: the members of the running wave
        self._wave_running = False
        self._waiting: deque[asyncio.Future] = deque()
        self._kicked = False
        self._silence: np.ndarray | None = None

    @property
    def mode(self) -> str:
        """For the run header: how trials take slots."""
        if self.reset_alone:
            return (f"{self.size} trials per model step; a finished slot takes the next "
                    "trial at once")
        return (f"{self.size} trials per model step in waves (the model cannot reset one "
                "slot alone: finished slots get silence until the whole wave ends)")

    # --- slots -------------------------------------------------------------------------------
    def _can_take(self) -> bool:
        return bool(self._free) and (self.reset_alone or not self._wave_running)

    async def acquire(self) -> int:
        """A free slot for the next trial, first come first served (waits, with no deadline,
        while all are taken: the trials holding them are watched)."""
        if not self._opened:
            try:
                self.model.open_batch(self.size)
            except Exception as e:  # every trial would need it: each waiting one says so
                raise ModelError(f"model {model_name(self.model)} failed in open_batch("
                                 f"{self.size}): {type(e).__name__}: {e}") from e
            self._opened = True
        if self._can_take() and not self._waiting:
            return self._take()
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed a slot while being cancelled
                self.release(fut.result())
            elif fut in self._waiting:
                self._waiting.remove(fut)
            raise

    def _take(self) -> int:
        slot = self._free.pop(0)
        self._trials[slot] = None
        if not self.reset_alone:
            self._wave.add(slot)
        return slot

    def release(self, slot: int) -> None:
        """The trial holding ``slot`` has ended (closed, aborted or failed)."""
        self._trials.pop(slot, None)
        if self.reset_alone or not self._wave_running:
            self._wave.discard(slot)
            self._free.append(slot)
            self._free.sort()
        elif not self._trials:  # the wave's last trial: the slots are free for the next
            self._free = list(range(self.size))
            self._wave.clear()
            self._wave_running = False
        while self._waiting and self._can_take():
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(self._take())
        self._kick()

    def opened(self, slot: int, duplex: "BatchedDuplex") -> None:
        self._trials[slot] = _Slot(duplex)

    # --- the lockstep ------------------------------------------------------------------------
    async def step(self, slot: int, frames: np.ndarray) -> None:
        """Step ``frames`` (n, frame_size) of the trial in ``slot`` with the others."""
        entry = self._trials[slot]
        entry.frames, entry.pos = frames, 0
        entry.done = asyncio.get_running_loop().create_future()
        done = entry.done
        self._kick()
        await done

    def _kick(self) -> None:
        # Deferred: the trials woken by the last step run (and push again) first.
        if self._kicked:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # a trial's coroutine closed after its loop ended (garbage-collected at teardown):
            # its slot is released, and nothing will step again
            return
        self._kicked = True
        loop.call_soon(self._run)

    def _ready(self) -> bool:
        trials = self._trials.values()
        return bool(self._trials) and all(t is not None and t.frames is not None
                                          for t in trials)

    def _run(self) -> None:
        self._kicked = False
        if not self._ready():
            return
        if not self.reset_alone:
            self._wave_running = True
        with np.errstate(over="ignore"):  # a huge frame's sum of squares: see level_problem
            while self._ready():
                self._tick()

    def _tick(self) -> None:
        trials: dict[int, _Slot] = self._trials  # type: ignore[assignment]
        frames: dict[int, np.ndarray] = {s: t.frames[t.pos] for s, t in trials.items()}
        for s in self._wave.difference(trials):  # a finished member of the wave
            if self._silence is None:
                self._silence = np.zeros(self.model.frame_size, dtype=np.float32)
            frames[s] = self._silence
        try:
            answers = self.model.step_batch(dict(sorted(frames.items())))
        except Exception as e:  # the shared call: every trial in it fails
            for t in list(trials.values()):
                t.settle(e if isinstance(e, ModelError) else t.duplex._failed("step_batch", e))
            return
        if self.abandoned:  # the call returned after the runner gave up: touch nothing
            for t in list(trials.values()):
                t.settle(watchdog.TrialAbandoned("the batched model call was abandoned"))
            return
        self.progress.beats += 1
        if not isinstance(answers, Mapping):
            for t in list(trials.values()):
                t.settle(ModelError(f"model {t.duplex._name}: step_batch returned "
                                    f"{type(answers).__name__}, not a mapping slot -> answer "
                                    f"(instance {t.duplex.info.instance.id})"))
            return
        for s, t in list(trials.items()):
            try:
                ans = answers.get(s, _MISSING)
                if ans is _MISSING:
                    raise ModelError(f"model {t.duplex._name}: step_batch gave no answer for "
                                     f"slot {s} (instance {t.duplex.info.instance.id})")
                if isinstance(ans, BaseException):
                    raise ans if isinstance(ans, ModelError) else t.duplex._failed("step", ans)
                t.duplex._accept(ans)
            except BaseException as e:  # TrialAbandoned too: that trial unwinds, alone
                t.settle(e)
                continue
            t.pos += 1
            if t.pos == len(t.frames):
                t.settle()


_MISSING = object()


class BatchedDuplex(SteppedDuplex):
    """One trial's session in a slot of a ``Batcher``: ``SteppedDuplex``'s framing, checks and
    Recording, with the model calls shared. ``release`` of the slot is the caller's."""

    def __init__(self, batcher: Batcher, slot: int, info: SessionInfo):
        self.batcher, self.slot = batcher, slot
        super().__init__(batcher.model, info)
        self._step_many = None
        batcher.opened(slot, self)

    def _start_model(self, info: SessionInfo) -> None:
        self.model.start_slot(self.slot, info)

    def _finish_model(self) -> None:
        self.model.finish_slot(self.slot)

    async def _step_frames(self, frames: np.ndarray) -> None:
        await self.batcher.step(self.slot, frames)
