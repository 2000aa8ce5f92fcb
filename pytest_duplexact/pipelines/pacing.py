"""One send clock per event loop for every streaming session on it (docs/realtime.md, "The
cost of streaming").

Each session's input chunk k is due at its own t0 + k / 16 kHz. A timer per chunk per
session (``asyncio.sleep``) costs a future, a timer handle and a heap operation each, 50 times
a second per session. Here every instant is a whole number of 16 kHz samples on the loop's
grid, a session's t0 is put on a grid line (``start``: at most one ``GRID`` later than asked),
so sessions streaming the usual chunk sizes are due on the same instants, and one timer per
instant wakes all of them (``wait``). Each session's clock stays exact: t0 is the instant its
first sample is due, and a slot is only ever released at or after its due time.
"""

from __future__ import annotations

import asyncio
import math
import weakref

from ..data.audio import SAMPLE_RATE

GRID = SAMPLE_RATE // 50  # 20 ms: a session's t0 falls on this grid (the default chunk)


class Pacer:
    """The loop's send clock (``of``): instants in samples since ``origin``."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pacer]" = \
        weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = weakref.ref(loop)  # weakly, as clock.LoopMonitor: a serial run's loops go
        self.origin = loop.time()
        self._waiters: dict[int, list[asyncio.Future]] = {}

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
        waiters = self._waiters.get(slot)
        if waiters is None:
            waiters = self._waiters[slot] = []
            loop.call_at(due, self._release, slot)
        waiters.append(fut)
        return fut

    def forget(self, slot: int, fut: asyncio.Future) -> None:
        """Drop a waiter that stopped waiting (its trial was cancelled): the registry must not
        keep a finished loop alive through its futures."""
        waiters = self._waiters.get(slot)
        if waiters is not None and fut in waiters:
            waiters.remove(fut)

    def _release(self, slot: int) -> None:
        for fut in self._waiters.pop(slot, ()):
            if not fut.done():  # a cancelled waiter (its trial stopped) is skipped
                fut.set_result(None)
