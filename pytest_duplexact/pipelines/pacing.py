"""One send clock per event loop for every streaming session on it (docs/realtime.md, "The
cost of streaming").

Each session's input chunk k is due at its own t0 + k / 16 kHz. A timer per chunk per
session (``asyncio.sleep``) costs a future, a timer handle and a heap operation each, 50 times
a second per session. Here every instant is a whole number of 16 kHz samples on the loop's
grid, a session's t0 is put on a grid line (``start``: at most one ``GRID`` later than asked),
so sessions streaming the usual chunk sizes are due on the same instants, and one timer per
instant wakes all of them (``wait``). Each session's clock stays exact: t0 is the instant its
first sample is due, and a slot is only ever released at or after its due time.

A session that can write a chunk without waiting (``send_nowait``) is not woken at all: its
send runs as a plain callback of the instant's one release (``call_at_slot``), so a chunk costs
no future, no task step and no coroutine resume, only the send itself.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Callable, Union

from ..data.audio import SAMPLE_RATE

GRID = SAMPLE_RATE // 50  # 20 ms: a session's t0 falls on this grid (the default chunk)


class Pacer:
    """The loop's send clock (``of``): instants in samples since ``origin``."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pacer]" = \
        weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = weakref.ref(loop)  # weakly, as clock.LoopMonitor: a serial run's loops go
        self.origin = loop.time()
        # per slot, in order: futures to set and callbacks to run, all at that slot's release
        self._waiters: dict[int, list[Union[asyncio.Future, Callable[[], None]]]] = {}

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "Pacer":
        pacer = cls._by_loop.get(loop)
        if pacer is None:
            pacer = cls._by_loop[loop] = cls(loop)
        return pacer

    def time(self, slot: int) -> float:
        """Loop time of ``slot``."""
        return self.origin + slot / SAMPLE_RATE

    def start(self) -> int:
        """The first grid line not before now: a new session's t0."""
        loop = self._loop()
        elapsed = (loop.time() - self.origin) * SAMPLE_RATE if loop is not None else 0.0
        return math.ceil(elapsed / GRID - 1e-9) * GRID

    def wait(self, slot: int) -> "asyncio.Future | None":
        """A future done at ``slot`` (None when it is already due); every session waiting on
        the same slot shares its one timer."""
        loop = self._loop()
        due = self.time(slot)
        if loop is None or due <= loop.time():
            return None
        fut = loop.create_future()
        self._add(loop, slot, due, fut)
        return fut

    def call_at_slot(self, slot: int, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at ``slot``'s release, on the slot's shared timer; a slot already due
        runs it at the loop's next turn (as ``asyncio.sleep(0)`` would: a late session's
        chunks must not hold up the loop back to back). ``fn`` must not raise."""
        loop = self._loop()
        if loop is None:
            return
        due = self.time(slot)
        if due <= loop.time():
            loop.call_soon(fn)
        else:
            self._add(loop, slot, due, fn)

    def _add(self, loop: asyncio.AbstractEventLoop, slot: int, due: float, item) -> None:
        waiters = self._waiters.get(slot)
        if waiters is None:
            waiters = self._waiters[slot] = []
            loop.call_at(due, self._release, slot)
        waiters.append(item)

    def forget(self, slot: int, item) -> None:
        """Drop a waiter (a future or a callback) that stopped waiting (its trial was
        cancelled): the registry must not keep a finished loop alive through it."""
        waiters = self._waiters.get(slot)
        if waiters is not None and item in waiters:
            waiters.remove(item)

    def _release(self, slot: int) -> None:
        for item in self._waiters.pop(slot, ()):
            if isinstance(item, asyncio.Future):
                if not item.done():  # a cancelled waiter (its trial stopped) is skipped
                    item.set_result(None)
                continue
            try:
                item()
            except Exception as e:  # one session's bug must not skip every later session
                loop = self._loop()
                if loop is not None:
                    loop.call_exception_handler({"message": "send clock callback failed",
                                                 "exception": e})
