"""A protocol-faithful fake of Raon-SpeechChat-Demo's gateway (krafton-ai/Raon-SpeechChat-Demo),
on 127.0.0.1, in the test's event loop.

What it speaks, from the demo's code: ``/ws/chat`` and ``/fd-demo/ws/chat`` (gateway/server.py),
the session's settings as query parameters (recorded here), an empty READY; frames
``[kind byte][payload]`` (proto/messages.py); per whole 1920-sample float32 frame of input
(proto/config.py, worker/session.py ``step``) a SEQ_DELTA trace, a TEXT delta when the model
emits text, then one AUDIO frame; PING from the server with an empty payload, answered by PONG
(gateway/proxy.py ``_keepalive``); a failed decode step sends ERROR "decode error: ..." and a
frame of silence; a session the worker cannot start gets ERROR "no workers available"; a
CLOSE from the client ends the session (the gateway closes the socket, no CLOSE back).

Instead of a model it follows a ``Script``: the words of ``text``, one per ``word_frames``
frames from ``speak_at_s``, each with a tone under it.
"""

from __future__ import annotations

import json
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
    reject: bool = False           # "no workers available"
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
    def __init__(self, *scripts: Script):
        super().__init__()
        self.scripts = list(scripts) or [Script()]  # one per session; the last repeats

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        if urlsplit(request.path).path not in PATHS:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        script = self.scripts[min(len(self.sessions), len(self.scripts) - 1)]
        rec = Session(dict(parse_qsl(urlsplit(ws.request.path).query)))
        self.sessions.append(rec)
        if script.reject:
            await ws.send(bytes([ERROR]) + b"no workers available")
            await ws.close()
            return
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
                    trace = {"frame_index": k + 1, "text_delta": ""}
                    if speaking and into == 0:
                        delta = (" " if w else "") + words[w]
                        trace["text_delta"] = delta
                        rec.texts.append((k, delta))
                    await ws.send(bytes([SEQ_DELTA]) + json.dumps(trace).encode())
                    if trace["text_delta"]:
                        await ws.send(bytes([TEXT]) + trace["text_delta"].encode())
                    out = tone(FRAME, 220.0, 0.3, offset=k * FRAME) if speaking else \
                        np.zeros(FRAME, np.float32)
                    await ws.send(bytes([AUDIO]) + out.astype("<f4").tobytes())
        except ConnectionClosed:
            pass

    def summary(self) -> list[dict[str, Any]]:
        return [vars(s) for s in self.sessions]
