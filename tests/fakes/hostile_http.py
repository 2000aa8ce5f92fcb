"""A raw HTTP/1.1 server on 127.0.0.1 that answers each request with scripted bytes: any status
line, headers and body pieces, then a close, an abort (reset) or a stall. What the fuzz tests of
the open-server adapters (tests/models/test_open_server_fuzz.py) put in front of the real
adapter code; aiohttp would refuse to send most of it.

``route(method, path) -> Reply`` picks the answer; a request it has no answer for gets 404.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Iterable

MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Reply:
    status: bytes = b"HTTP/1.1 200 OK"
    headers: tuple[bytes, ...] = ()
    body: Iterable[bytes] = ()          # written piece by piece, as they come
    then: str = "close"                 # "close" | "abort" | "stall" | "keep" (keep-alive)
    raw_head: bytes | None = None       # sent instead of status + headers when given

    def head(self) -> bytes:
        if self.raw_head is not None:
            return self.raw_head
        return b"\r\n".join((self.status, *self.headers)) + b"\r\n\r\n"


def sse(*pieces: bytes, then: str = "close") -> Reply:
    return Reply(headers=(b"Content-Type: text/event-stream", b"Cache-Control: no-store"),
                 body=pieces, then=then)


def ok_json(body: bytes) -> Reply:
    return Reply(headers=(b"Content-Type: application/json",
                          b"Content-Length: %d" % len(body)), body=(body,), then="keep")


@dataclass
class HostileServer:
    route: Callable[[str, str], Reply | None]
    requests: list[tuple[str, str]] = field(default_factory=list)
    written: int = 0                    # body bytes the client took (a flood's reach)

    async def __aenter__(self) -> "HostileServer":
        self._stalled = asyncio.Event()
        self._conns: set[asyncio.Task] = set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(asyncio.current_task())
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                asyncio.CancelledError):  # cancelled: the server ends (asyncio logs a
            pass                          # cancelled connection task as an error)
        finally:
            self._conns.discard(asyncio.current_task())
            writer.transport.abort()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = (lines[0].split(" ") + ["", ""])[:3]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        await reader.readexactly(length)
        self.requests.append((method, path))
        reply = self.route(method, path) or Reply(status=b"HTTP/1.1 404 Not Found",
                                                  headers=(b"Content-Length: 0",), then="keep")
        writer.write(reply.head())
        for piece in reply.body:
            writer.write(piece)
            await writer.drain()
            self.written += len(piece)
        await writer.drain()
        if reply.then == "keep":
            return True
        if reply.then == "stall":
            await asyncio.Event().wait()  # until the client goes or the server ends
        if reply.then == "abort":
            writer.transport.abort()
        else:
            writer.close()
        return False
