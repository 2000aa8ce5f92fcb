"""What the fakes of the open models' own HTTP servers share (socketio_server.py, lychee_server.py,
miniomni_server.py): an aiohttp web server on 127.0.0.1 at a free port, optionally TLS, with
the same standalone entry as the websocket fakes (fake_ws.serve_until_stdin_closes).

Each fake keeps its server's routes and rules in its own module; the ground truth a test
compares against is recorded on ``time.monotonic()`` (the test's event loop clock)."""

from __future__ import annotations

import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_ws import OUT_RATE, JsonScript, speech, tone


@dataclass(frozen=True)
class SpokenScript(JsonScript):
    """The fields every one of these fakes' scripts has: what its replies say and sound like
    (a tone, or a speech recording so a VAD hears speech)."""

    text: str = "one two three four five six"
    tone_hz: float = 440.0
    amplitude: float = 0.3
    speech_file: str | None = None
    tag: str | None = None

    def voice(self) -> np.ndarray | None:
        return speech(self.speech_file, rate=OUT_RATE) if self.speech_file else None

    def audio(self, voice: np.ndarray | None, n: int, offset: int = 0) -> np.ndarray:
        """Samples [offset, offset + n) of the reply: the recording (zero past its end) or
        the tone."""
        if voice is None:
            return tone(n, self.tone_hz, self.amplitude, offset=offset)
        out = np.zeros(n, np.float32)
        piece = voice[offset:offset + n]
        out[: len(piece)] = piece
        return out


def played_end(sends: list[tuple[float, int]], t0: float, rate: int = OUT_RATE) -> float:
    """Where audio these fakes sent at (monotonic, samples) ends playing at 1x, in seconds
    after ``t0``: each chunk plays from its arrival or the previous chunk's end, whichever is
    later."""
    end = 0.0
    for at, n in sends:
        end = max(at - t0, end) + n / rate
    return end


class FakeHTTPServer:
    """``async with`` serves ``self.app`` (built by ``routes``) on 127.0.0.1; ``sessions``
    holds each session's record, ``requests`` counts every request that reached a route."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.sessions: list[Any] = []
        self.requests = 0
        self.tls = tls
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def port(self) -> int:
        return self._site._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def __aenter__(self):
        self.routes(self.app)
        self._runner = web.AppRunner(self.app, handle_signals=False, access_log=None,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls)
        await self._site.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()


def self_signed_tls() -> ssl.SSLContext:
    """A server context with a throw-away certificate for 127.0.0.1 (what the demos' ``pem.py``
    makes: trusted by nobody)."""
    import trustme

    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    return ctx
