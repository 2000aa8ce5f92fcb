"""Sessions connect a few at a time on the loop that paces every live session's input.

Connecting a session costs that loop's thread CPU: gpt-realtime's about 5 ms (the SDK's URL
and proxy handling, the websocket handshake, session.update; profiled against the fake
server), in a handful of steps. Sessions that start together take those steps together, so
one turn of the loop ran all their steps back to back: 31 connecting at once stalled the loop
90-165 ms, and the sessions already streaming went over the timing tolerance and were run again
(``benchmarks/sessions_per_core.py`` at 128, the first second of the run).

And the first session an event loop opens pays for what every later one reuses: an SDK's
lazily imported modules, its client, a TLS context. For gpt-realtime that is about 0.4 s with
the loop's thread held (279 modules imported on the first connect).

So ``opening()`` admits the loop's first connection alone, then at most ``AT_ONCE`` at a time:
a turn of the loop then holds at most that many connections' steps. With a server far away
(0.3-1 s to connect), ``AT_ONCE`` lanes still open 8-25 sessions a second, more than a run at
256 sessions of 25 s instances starts (about 10). Nothing streams before its own session is
open, so waiting moves no trial's clock; it is a wait to be admitted (``admitting``): not
silence for the watchdog, and part of the trial's ``admission_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import AsyncIterator

from ..models.streaming_contract import admitting

AT_ONCE = 8  # connections in progress on one loop, after its first


class _Lanes:
    __slots__ = ("first", "free")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.first: asyncio.Future | None = loop.create_future()  # None once it has ended
        self.free = asyncio.Semaphore(AT_ONCE)


_lanes: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lanes]" = \
    weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def opening() -> AsyncIterator[None]:
    """The body connects one session (see the module doc for who waits)."""
    loop = asyncio.get_running_loop()
    lanes = _lanes.get(loop)
    if lanes is None:  # the loop's first connection: alone
        lanes = _lanes[loop] = _Lanes(loop)
        first = lanes.first
        try:
            yield
        finally:
            lanes.first = None
            first.set_result(None)
        return
    with admitting():  # not the model's silence, for the watchdog (streaming_contract)
        while lanes.first is not None:
            # asyncio.wait, not an await of the future: a waiter cancelled here must not
            # cancel the first connection's future
            await asyncio.wait({lanes.first})
        await lanes.free.acquire()
    try:
        yield
    finally:
        lanes.free.release()
