"""A protocol-faithful fake of Raon-SpeechChat-Demo's gateway (krafton-ai/Raon-SpeechChat-Demo),
on 127.0.0.1, in the test's event loop.

What it speaks, from the demo's code: ``/ws/chat`` and ``/fd-demo/ws/chat`` (gateway/server.py),
the session's settings as query parameters (recorded here), an empty READY; frames
``[kind byte][payload]`` (proto/messages.py); per whole 1920-sample float32 frame of input
(proto/config.py, worker/session.py ``step``) a SEQ_DELTA trace (a text line), a TEXT delta
when the model emits text, then one AUDIO frame: one frame per call (worker/actor.py
``feed_and_decode``, ``FD_MAX_DECODE_FRAMES_PER_CALL=1``), never a burst; PING from the server
with an empty payload, answered by PONG (gateway/proxy.py ``_keepalive``); a failed decode step
sends a frame of silence, then ERROR "decode error: ..."; with ``capacity`` sessions open (the
workers' ``max_sessions`` summed) a new one gets ERROR "no workers available" at once and the
socket closes (gateway/server.py); a CLOSE from the client ends the session (the gateway
closes the socket, no CLOSE back). ``ssl_context``: serve wss:// (``demo_tls``: a certificate
made as the demo's ``scripts/entrypoint_gateway.sh`` makes it).

Instead of a model it follows a ``Script``: the words of ``text``, one per ``word_frames``
frames from ``speak_at_s``, each with a tone under it.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

if str(Path(__file__).resolve().parent) not in sys.path:  # fake_ws.py is beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_ws import FakeServer, tone

RATE, FRAME = 24_000, 1_920
READY, AUDIO, TEXT, SEQ_DELTA, ERROR, CLOSE, PING, PONG = 0, 1, 2, 4, 5, 6, 7, 8
PATHS = ("/ws/chat", "/ws/chat/", "/fd-demo/ws/chat", "/fd-demo/ws/chat/")


@dataclass(frozen=True)
class Script:
    speak_at_s: float = 0.4
    text: str = "sure I can help with that"
    word_frames: int = 2           # each word lasts this many 80 ms frames
    ping_at_frame: int | None = 2  # the gateway's keepalive (every 30 s in the demo)
    decode_error_at_frame: int | None = None
    close_at_frame: int | None = None
    close_reason: str = "overloaded_backlog"


@dataclass
class Session:
    query: dict[str, str]
    frames_in: int = 0
    pongs: int = 0
    closed_by_client: bool = False
    texts: list[tuple[int, str]] = field(default_factory=list)


class FakeRaonGateway(FakeServer):
    def __init__(self, *scripts: Script, capacity: int | None = None,
                 ssl_context: ssl.SSLContext | None = None):
        super().__init__()
        self.scripts = list(scripts) or [Script()]  # one per session; the last repeats
        self.capacity = capacity
        self.ssl_context = ssl_context
        self.active = 0
        self.rejected = 0
        self.most_at_once = 0

    @property
    def url(self) -> str:
        return f"{'wss' if self.ssl_context else 'ws'}://127.0.0.1:{self.port}"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        if urlsplit(request.path).path not in PATHS:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        if self.capacity is not None and self.active >= self.capacity:
            self.rejected += 1
            await ws.send(bytes([ERROR]) + b"no workers available")
            await ws.close()
            return
        script = self.scripts[min(len(self.sessions), len(self.scripts) - 1)]
        rec = Session(dict(parse_qsl(urlsplit(ws.request.path).query)))
        self.sessions.append(rec)
        self.active += 1
        self.most_at_once = max(self.most_at_once, self.active)
        try:
            await self._serve(ws, script, rec)
        finally:
            self.active -= 1

    async def _serve(self, ws: ServerConnection, script: Script, rec: Session) -> None:
        await ws.send(bytes([READY]))
        words = script.text.split()
        first = round(script.speak_at_s * RATE / FRAME)
        raw = b""
        try:
            while True:
                msg = await ws.recv()
                kind, payload = msg[0], msg[1:]
                if kind == PONG:
                    rec.pongs += 1
                    continue
                if kind == CLOSE:
                    rec.closed_by_client = True
                    break
                if kind != AUDIO:
                    continue
                raw += payload
                while len(raw) >= FRAME * 4:
                    raw = raw[FRAME * 4:]
                    k = rec.frames_in
                    rec.frames_in += 1
                    if k == script.ping_at_frame:
                        await ws.send(bytes([PING]))
                    if k == script.close_at_frame:
                        await ws.send(bytes([CLOSE]) + script.close_reason.encode())
                        return
                    if k == script.decode_error_at_frame:
                        await ws.send(bytes([AUDIO]) + np.zeros(FRAME, "<f4").tobytes())
                        await ws.send(bytes([ERROR]) + b"decode error: CUDA hiccup")
                        continue
                    w, into = divmod(k - first, script.word_frames)
                    speaking = k >= first and w < len(words)
                    delta = ""
                    if speaking and into == 0:
                        delta = (" " if w else "") + words[w]
                        rec.texts.append((k, delta))
                    trace = f"frame={k + 1} seq_len={k + 10} token_count=1 text={delta!r}"
                    await ws.send(bytes([SEQ_DELTA]) + trace.encode())
                    if delta:
                        await ws.send(bytes([TEXT]) + delta.encode())
                    out = tone(FRAME, 220.0, 0.3, offset=k * FRAME) if speaking else \
                        np.zeros(FRAME, np.float32)
                    await ws.send(bytes([AUDIO]) + out.astype("<f4").tobytes())
        except ConnectionClosed:
            pass

    def summary(self) -> list[dict[str, Any]]:
        return [vars(s) for s in self.sessions]


DEMO_NAME = "raon-speechchat-demo"


def demo_tls(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate made by the demo's own command
    (scripts/entrypoint_gateway.sh: ``openssl req -x509 ... -subj /CN=raon-speechchat-demo``:
    that name only, no subjectAltName), and the certificate's PEM for the client's ca_file."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key),
                    "-out", str(cert), "-days", "365", "-nodes", "-subj", f"/CN={DEMO_NAME}"],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx, cert
