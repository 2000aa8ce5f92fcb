"""A raw WebSocket server on 127.0.0.1 that does whatever its handler does with each
connection: send text or binary frames of any size, chatter, ignore what it is told, stall.
What the hostile tests of the WebSocket adapters (vllm-omni, minicpm-o) put in front of the
real adapter code. ``max_size=None``: it accepts whatever the client sends.

    async with HostileWS(handler) as server:   # handler(ws) -> None, per connection
        server.url  # ws://127.0.0.1:PORT
"""

from __future__ import annotations

import asyncio
import json
from typing import Awaitable, Callable

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

Handler = Callable[[ServerConnection], Awaitable[None]]


class HostileWS:
    def __init__(self, handler: Handler):
        self.handler = handler
        self.connections = 0
        self.received: list[str | bytes] = []

    async def _serve(self, ws: ServerConnection) -> None:
        self.connections += 1
        try:
            await self.handler(ws)
        except (ConnectionClosed, asyncio.CancelledError):
            pass

    async def __aenter__(self) -> "HostileWS":
        self._server = await serve(self._serve, "127.0.0.1", 0, max_size=None,
                                   compression=None, close_timeout=0.5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


async def read_json(ws: ServerConnection, timeout: float = 5.0) -> dict:
    """The client's next message, parsed (the adapters under test send JSON text)."""
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def hold(ws: ServerConnection) -> None:
    """Read and ignore everything until the client goes away."""
    async for _ in ws:
        pass


class Inbox:
    """A socket for a session tested below the wall clock: ``recv`` hands out the given raw
    messages in order, then waits forever; what the session sends is kept."""

    def __init__(self, raws):
        self.raws = list(raws)
        self.sent: list[str] = []

    async def recv(self):
        if not self.raws:
            await asyncio.Event().wait()
        return self.raws.pop(0)

    async def send(self, text):
        self.sent.append(text)


def chatter(every_s: float, message: str = '{"type": "rate_limits.updated"}') -> Handler:
    """Sends ``message`` every ``every_s`` seconds and ignores all it is told (never
    ``session.created``, never ``session.closed``)."""

    async def handler(ws: ServerConnection) -> None:
        while True:
            await ws.send(message)
            await asyncio.sleep(every_s)

    return handler
