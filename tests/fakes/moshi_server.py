"""A protocol-faithful fake of ``python -m moshi.server`` (kyutai-labs/moshi) and of NVIDIA
PersonaPlex's fork of it, on 127.0.0.1, in the test's event loop, served by aiohttp as both
servers are.

What it speaks, from their ``moshi/moshi/server.py``: ``GET /api/chat`` upgraded to a
WebSocket (``ws.prepare`` first, before anything else); one ``asyncio.Lock`` taken after the
upgrade, so a second client waits connected, without a word; inside it the handshake byte
``\\x00`` (PersonaPlex: after ``handshake_delay_s``, its voice and text prompts run through the
model); then per message a kind byte: ``\\x01`` Ogg/Opus pages both ways through sphn at 24 kHz
(one page per 1920-sample Mimi frame out), ``\\x02`` a UTF-8 text piece out. The input is
decoded page by page and cut into 1920-sample frames; each frame is answered at once: Kyutai's
server sends the frame's audio, then its text piece; PersonaPlex's, the text first. PersonaPlex
reads ``voice_prompt`` (a name in ``voices``) and ``text_prompt`` from the query and fails the
connection after the upgrade (an exception in the handler: aiohttp drops the socket) for an
unknown or missing voice prompt, and for any ``seed`` (it reads ``request["seed"]``).
``ssl_context``: serve TLS, as ``--ssl DIR`` does.

Instead of a model it follows a ``Script``: an energy detector on each input frame; once the
user has been quiet ``answer_after_frames`` frames after speaking, it says ``text``, one word per
``word_frames`` frames with a tone under each, and (``stop_on_overlap``) stops as soon as the
user speaks over it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import WSMsgType, web

RATE, FRAME = 24_000, 1_920
MIMI_S = FRAME / RATE  # one Mimi frame: 80 ms
HANDSHAKE, AUDIO, TEXT = b"\x00", b"\x01", b"\x02"


@dataclass(frozen=True)
class Script:
    text: str = "sure I can help"
    word_frames: int = 2
    answer_after_frames: int = 3    # 240 ms of quiet after the user spoke
    stop_on_overlap: bool = True
    speech_rms: float = 0.02        # an input frame above this is the user speaking
    tone_hz: float = 220.0
    amplitude: float = 0.3


@dataclass
class Session:
    query: dict[str, str]
    opened: float = 0.0             # monotonic: the upgrade
    handshake: float | None = None  # monotonic: the handshake byte sent
    closed: float | None = None
    frames_in: int = 0
    pages_in: int = 0
    answers: list[int] = field(default_factory=list)  # input frames where a reply began
    stops: list[int] = field(default_factory=list)    # input frames where it stopped


class Turns:
    """The scripted model: one output frame (and maybe a text piece) per input frame."""

    def __init__(self, script: Script, rec: Session):
        self.s, self.rec = script, rec
        self.k = 0
        self.heard = False
        self.quiet = 0
        self.speaking_from: int | None = None
        self.words = script.text.split()

    def step(self, frame: np.ndarray) -> tuple[np.ndarray, str]:
        s, k = self.s, self.k
        self.k += 1
        user = float(np.sqrt(np.mean(frame ** 2))) > s.speech_rms
        if self.speaking_from is not None:
            if user and s.stop_on_overlap:
                self.rec.stops.append(k)
                self.speaking_from, self.heard, self.quiet = None, True, 0
                return np.zeros(FRAME, np.float32), ""
            j = k - self.speaking_from
            if j >= len(self.words) * s.word_frames:
                self.speaking_from = None
                return np.zeros(FRAME, np.float32), ""
            t = (np.arange(FRAME) + j * FRAME) / RATE
            out = (s.amplitude * np.sin(2 * np.pi * s.tone_hz * t)).astype(np.float32)
            word = " " + self.words[j // s.word_frames] if j % s.word_frames == 0 else ""
            return out, word
        if user:
            self.heard, self.quiet = True, 0
        elif self.heard:
            self.quiet += 1
            if self.quiet >= s.answer_after_frames:
                self.heard, self.speaking_from = False, k + 1
                self.rec.answers.append(k + 1)
        return np.zeros(FRAME, np.float32), ""


class FakeMoshiServer:
    """``async with FakeMoshiServer(...) as srv``: ``srv.url`` (ws[s]://127.0.0.1:PORT/api/chat),
    ``srv.sessions`` in the order they upgraded, ``srv.most_at_once`` (sessions past the
    lock together: 1)."""

    def __init__(self, script: Script = Script(), *, personaplex: bool = False,
                 voices: tuple[str, ...] = ("NATF0.pt",), handshake_delay_s: float = 0.0,
                 ssl_context: Any = None):
        import sphn

        self.sphn, self.script, self.personaplex = sphn, script, personaplex
        self.voices, self.delay, self.ssl = voices, handshake_delay_s, ssl_context
        self.lock = asyncio.Lock()
        self.sessions: list[Session] = []
        self.most_at_once = 0
        self._inside = 0

    @property
    def url(self) -> str:
        return f"{'wss' if self.ssl else 'ws'}://127.0.0.1:{self.port}/api/chat"

    async def __aenter__(self) -> "FakeMoshiServer":
        app = web.Application()
        app.router.add_get("/api/chat", self.handle_chat)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()

    async def handle_chat(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        rec = Session(dict(request.query), opened=time.monotonic())
        self.sessions.append(rec)
        if self.personaplex:
            name = request.query["voice_prompt"]  # KeyError without one, as PersonaPlex
            if name not in self.voices:
                raise FileNotFoundError(f"Requested voice prompt '{name}' not found")
            _ = request.query["text_prompt"]
            if "seed" in request.query:
                _ = request["seed"]  # PersonaPlex 3428dfd: a KeyError, the session fails
        try:
            async with self.lock:
                self._inside += 1
                self.most_at_once = max(self.most_at_once, self._inside)
                try:
                    await asyncio.sleep(self.delay)
                    await ws.send_bytes(HANDSHAKE)
                    rec.handshake = time.monotonic()
                    await self._serve(ws, rec)
                finally:
                    self._inside -= 1
        finally:
            rec.closed = time.monotonic()
        return ws

    async def _serve(self, ws: web.WebSocketResponse, rec: Session) -> None:
        reader = self.sphn.OpusStreamReader(RATE)
        writer = self.sphn.OpusStreamWriter(RATE)
        model = Turns(self.script, rec)
        pending = np.zeros(0, np.float32)
        async for message in ws:
            if message.type != WSMsgType.BINARY or not message.data:
                continue
            if message.data[:1] != AUDIO:
                continue
            rec.pages_in += 1
            pending = np.concatenate([pending, reader.append_bytes(message.data[1:])])
            while len(pending) >= FRAME:
                frame, pending = pending[:FRAME], pending[FRAME:]
                rec.frames_in += 1
                out, word = model.step(frame)
                page = AUDIO + writer.append_pcm(out)
                piece = TEXT + word.encode() if word else b""
                for m in ((piece, page) if self.personaplex else (page, piece)):
                    if len(m) > 1:
                        await ws.send_bytes(m)
