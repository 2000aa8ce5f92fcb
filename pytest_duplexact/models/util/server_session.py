"""What the sessions of the open models' own demo servers share (socketio_omni.py, lychee_fd.py,
mini_omni2.py): their events arrive in callbacks or background tasks, so they go through a
queue that ``events()`` drains; a failure seen there ends the stream and is raised by the
next ``send``/``events`` call. None of the servers is told about a cut (``truncate``): each
cut is the server's own decision, or there is no barge-in at all."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from ..contract import ModelError
from ..streaming_contract import Event

_END = object()  # the queue's end: the server ended the session, or it failed


class QueuedEvents:
    def __init__(self) -> None:
        self._events: asyncio.Queue = asyncio.Queue()
        self._failure: ModelError | None = None

    def _put(self, *events: Event) -> None:
        for ev in events:
            self._events.put_nowait(ev)

    def _end(self) -> None:
        """The server ended the session (``events()`` then ends: a dropped session)."""
        self._events.put_nowait(_END)

    def _fail(self, error: ModelError) -> None:
        if self._failure is None:
            self._failure = error
        self._end()

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def events(self) -> AsyncIterator[Event]:
        while True:
            ev = await self._events.get()
            if ev is _END:
                self._check()
                return
            yield ev

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """Nothing to tell the server (see the module docstring)."""
        return None


async def started(session: Any) -> Any:
    """``session`` after its ``start()``; closed again when starting fails."""
    try:
        await session.start()
    except BaseException:
        await session.close()
        raise
    return session
