"""What the WebSocket adapters (gpt-realtime and its dialects, minicpm-o, vllm-omni) share
about their connection, written once: the key as a masked Authorization header, the options
every socket is opened with, a failed handshake in the adapter's words, the receive that
scrubs a frame before any local holds it and turns a drop into ``TransientModelError`` with
its close code (a message past the size bound is the server's error instead)."""

from __future__ import annotations

import asyncio
import inspect
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.sync.client import connect as _sync_connect

from ...bridges import wire
from ...remote.netsafety import BearerHeaders, Secret
from ..contract import ModelError
from ..model_options import TRANSIENT_HTTP, connect_error, scrub, shown_url, tls_context
from ..streaming_contract import TransientModelError

NO_CLOSE_FRAME = 1006  # the close code of a connection that ended without a close frame
TOO_BIG = 1009  # we closed it: a message over max_size
_OPEN = State.OPEN


@dataclass(frozen=True)
class WsPeer:
    """One adapter's server as its sockets see it: its label, the key it may send, and what
    a failed handshake means there (model_options.connect_error's words)."""

    label: str
    key_env: str
    rejected: str = "the server rejected the API key"
    not_found: str | None = None
    transient: frozenset[int] = TRANSIENT_HTTP
    busy: str = "rate limit or server busy"
    other: str = ""

    def headers(self) -> BearerHeaders | None:
        """The key, when set, in a masked holder: never a plain str in a frame local that a
        ``-l`` traceback or a junit report would print."""
        key = os.environ.get(self.key_env)
        return BearerHeaders(Secret(key)) if key else None

    def options(self, url: str, open_timeout: float) -> dict[str, Any]:
        """A socket's options: a message past the bridge's bound (16 MiB: minutes of audio)
        ends the session as the server's error instead of growing memory without limit."""
        options: dict[str, Any] = {"max_size": wire.MAX_MESSAGE, "compression": None,
                                   "open_timeout": open_timeout,
                                   "additional_headers": self.headers()}
        if url.startswith("wss"):
            options["ssl"] = tls_context()
        return options

    def connect_error(self, e: BaseException) -> ModelError:
        return connect_error(e, self.label, (self.key_env,), rejected=self.rejected,
                             not_found=self.not_found, transient=self.transient,
                             busy=self.busy, other=self.other)

    async def connect(self, connect: Callable[..., Awaitable[Any]], url: str,
                      **options: Any) -> Any:
        """``await connect(url, **options)``, a failure raised as ``connect_error``'s."""
        try:
            return await connect(url, **options)
        except Exception as e:
            raise self.connect_error(e) from None

    def dropped(self, e: ConnectionClosed, url: str, words: str,
                reason: bool = False) -> ModelError:
        """A closed connection in words: past the size bound (we closed with 1009) is the
        server's error naming the bound; any other drop is retried, with its close code (and
        the server's reason, scrubbed, with ``reason``)."""
        if e.sent is not None and e.sent.code == TOO_BIG:
            return ModelError(f"{self.label}: {shown_url(url)} sent a message over the bound "
                              f"of {wire.MAX_MESSAGE} bytes (bridges/wire.py MAX_MESSAGE): "
                              "a server error")
        said = f": {scrub(e.rcvd.reason, self.key_env)}" \
            if reason and e.rcvd is not None and e.rcvd.reason else ""
        return TransientModelError(f"{self.label}: {words} (close code {close_code(e)}{said})")


# websockets 17.1 deprecated the sync ``connect`` outside a ``with`` block (it warns on the
# first recv), and keeps the historical behaviour with ``legacy=True``, which 14-16 lack.
_LEGACY = {"legacy": True} if "legacy" in inspect.signature(_sync_connect).parameters else {}


def sync_connect(url: str, **options: Any) -> Any:
    """websockets' sync client connection to ``url``, returned open (the caller closes it), on
    every websockets version the project allows."""
    return _sync_connect(url, **options, **_LEGACY)


def send_now(ws: Any, text: str) -> bool:
    """Send ``text`` as one text frame on a websockets asyncio connection at once, past the
    asyncio wrapper of ``Connection.send``, when that wrapper would only check and write: the
    connection is open, no fragmented send is in progress and the transport is neither
    closing nor paused (so its ``drain`` would not wait). The frame is the library's own
    (``protocol.send_text``: framing, masking) written as ``send_data`` writes it. False,
    having sent nothing, otherwise: the caller awaits ``ws.send``, whose checks and waits
    then apply. The hot path of a streaming session (50 appends a second): the wrapper's
    async context manager and its coroutines are about a fifth of a send's CPU
    (docs/realtime.md, "The cost of streaming")."""
    if not ready_now(ws):
        return False
    write_now(ws, text)
    return True


def ready_now(ws: Any) -> bool:
    """``send_now``'s test alone: a frame written now would not wait (and cannot fail on
    the connection's state). A caller that has yet to build its frame asks this first."""
    protocol = getattr(ws, "protocol", None)
    transport = getattr(ws, "transport", None)
    return not (protocol is None or transport is None or protocol.state is not _OPEN
                or _fragment_in_flight(ws)
                or getattr(ws, "paused", True) or transport.is_closing())


# The connection's marker of a fragmented send in progress: websockets 16 renamed it. A
# version with neither is refused (every frame then goes through the awaited ``ws.send``).
_FRAGMENT_MARKERS = ("send_in_progress", "fragmented_send_waiter")  # 16 on; 14-15


def _fragment_in_flight(ws: Any) -> bool:
    for name in _FRAGMENT_MARKERS:
        if hasattr(ws, name):
            return getattr(ws, name) is not None
    return True


def write_now(ws: Any, text: str) -> None:
    """``send_now``'s write, for a connection ``ready_now`` said yes to on this same turn of
    the loop (nothing can have changed it since)."""
    ws.protocol.send_text(text.encode())
    ws.send_data()


def close_code(e: ConnectionClosed) -> int:
    return e.rcvd.code if e.rcvd is not None else NO_CLOSE_FRAME


async def receive(recv: Callable[[], Awaitable[Any]], *, closed: Callable[[], bool],
                  dropped: Callable[[ConnectionClosed], BaseException],
                  timeout: float | None = None, key_vars: tuple[str, ...] = ()) -> Any:
    """The next frame (scrubbed of ``key_vars`` before any local holds it), or None once we
    closed the socket ourselves; a drop raises ``dropped(e)``."""
    frame = asyncio.wait_for(recv(), timeout) if timeout else recv()
    try:
        return scrub(await frame, *key_vars) if key_vars else await frame
    except ConnectionClosed as e:
        if closed():
            return None
        raise dropped(e) from None


class DuplexSocketSession:
    """The end of a session of a natively duplex model over one socket: a cut needs no
    message (the model decides itself when to stop), and ``close`` runs ``_close`` once."""

    _closed = False

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """Nothing to tell the server: a duplex model decides itself when to stop."""
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._close()

    async def _close(self) -> None:
        """Tell the server (when its protocol has a word for it) and close the socket."""
        raise NotImplementedError
