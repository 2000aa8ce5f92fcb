"""A protocol-faithful fake of the Freeze-Omni and VITA-1.5 demo servers (socket.io), on
127.0.0.1, built on python-socketio's own server class as Flask-SocketIO is.

What it keeps from the real servers (VITA-MLLM/Freeze-Omni ``bin/server.py``, ``web/vad.py``,
``web/parms.py``; VITA's ``web_demo/server.py``, checked by running them: tests/upstream):

* HTTPS only, a self-signed certificate (both pass ``ssl_context`` to ``socketio.run``): an
  ``http://`` client is reset;
* ``connect``: past ``max_users`` it emits ``too_many_users`` and does not register the user
  (whose ``audio`` then gets it disconnected);
* ``audio`` (a JSON *string* ``{"sample_rate", "audio": [uint8 bytes of int16]}``): first, if a
  TTS segment is queued, *one* segment goes back (``audio``, int16 24 kHz bytes; VITA also emits
  ``response_text`` ``{"text"}`` after it when the text changed); then a pending interruption
  (``tts_over_time``) emits ``stop_tts``; then the input joins the VAD's FIFO, read in
  ``server_chunk`` pieces (2560 samples for Freeze-Omni, 4096 for VITA);
* Freeze-Omni answers when its state head says ``'ss'`` (here ``silence_ms`` after the speech
  ended), and every answer starts with ``interrupt()``: a pending ``stop_tts``, so one comes
  before **every** answer (in the same message as the first segment when the model is fast:
  ``answer_after_ms=0``); a barge-in is the same thing, the next turn's ``'ss'`` while an
  answer is still queued or playing. Its silero VAD iterator stays triggered after a turn:
  speech is not heard until ``vad_end_ms`` (2000) of silence have passed since the last
  speech (``web/vad.py``: the iterator's end is ignored outside a dialog, never reset);
* VITA keeps one TTS output queue and one ``last_text`` for all users (whichever user's
  ``audio`` message comes first gets the next segment) and alternates its two LLM processes:
  the first segment of an answer from the other process is dropped and ``stop_tts`` sent in
  its place; a new turn (speech of at least 1 s) stops the answering process; speech in the
  first chunk its VAD sees kills the user's VAD thread (``last_audio`` unset,
  ``wakeup_and_vad.py:186``): nothing is heard after it;
* ``recording-started`` / ``recording-stopped`` reset the user and emit ``stop_tts``;
  ``prompt_text`` -> ``prompt_success``; ``reset_state`` (VITA) is recorded.

Instead of a model it follows a ``Script``: an energy VAD per server chunk; ``silence_ms``
after the user's speech ends the turn is decided, and the reply's ``segments`` (each
``segment_s`` of a tone or of a speech file, with its share of ``text``) are queued
``answer_after_ms`` later. A turn decided while a reply is queued or still playing interrupts
it: the queue is dropped and the next ``audio`` message gets ``stop_tts``. Ground truth per
session on ``time.monotonic()``: every segment's send time and length, each turn's decision
time and the ``stop_tts`` that cut it.

Run standalone (for the plugin tests)::

    python tests/fakes/socketio_server.py --dialect vita-1.5 [--script JSON] [--log FILE]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import socketio
from aiohttp import web

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_http import FakeHTTPServer, SpokenScript, self_signed_tls
from fake_ws import serve_until_stdin_closes, standalone_parser

IN_RATE = 16_000
OUT_RATE = 24_000
SERVER_CHUNK = {"freeze-omni": 2560, "vita-1.5": 4096}


@dataclass(frozen=True)
class Script(SpokenScript):
    silence_ms: float = 320.0       # speech end -> the turn is decided (Freeze-Omni's 'ss')
    vad_end_ms: float = 2000.0      # Freeze-Omni: silence that untriggers its VAD after a turn
    answer_after_ms: float = 200.0  # end of speech -> the reply's segments are queued
    segments: int = 2
    segment_s: float = 0.6
    vad_rms: float = 0.02
    max_turns: int | None = None
    max_users: int = 5
    drop_after_ms: float | None = None     # the server disconnects the user at this input time
    out_time_after_ms: float | None = None  # emits out_time (its --timeout) at this input time
    hang: bool = False                     # accept TCP, never answer the socket.io handshake
    min_turn_ms: float = 0.0               # VITA: shorter speech is skipped (1000 there)


@dataclass
class Turn:
    index: int
    decided_at: float | None = None        # monotonic: the end of turn ('ss')
    queued_at: float | None = None
    sends: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, samples)
    cut_at: float | None = None            # monotonic of the stop_tts that ended it
    cut_msg: int | None = None             # which incoming audio message carried that stop_tts
    ended: str = "queued"                  # queued | sent | interrupted
    pulled_by: list[int] = field(default_factory=list)  # session index of each send (VITA)
    send_msgs: list[int] = field(default_factory=list)  # incoming audio message each rode on


@dataclass
class Session:
    index: int
    sid: str
    script: Script
    registered: bool = True
    received: list[dict[str, Any]] = field(default_factory=list)  # control events (t, event)
    audio_messages: int = 0
    input_samples: int = 0
    t0_monotonic: float | None = None
    turns: list[Turn] = field(default_factory=list)
    texts: list[tuple[float, str]] = field(default_factory=list)
    disconnected: bool = False
    dropped: bool = False
    stops_with_segment: int = 0            # stop_tts sent in a handler that also sent audio

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "tag": self.script.tag, "t0_monotonic": self.t0_monotonic,
                "audio_messages": self.audio_messages, "dropped": self.dropped,
                "turns": [t.__dict__ for t in self.turns]}


class _Shared:
    """What VITA's server keeps once for all users: the TTS output queue, ``last_text`` and the
    LLM process whose output was sent last (``last_tts_model_id``)."""

    def __init__(self):
        self.tts: deque[tuple[np.ndarray, str, int, "Turn"]] = deque()
        self.last_text = ""
        self.last_llm = 0
        self.answers = 0


class _User:
    """One connected user's state: the VAD FIFO, the TTS queue (VITA: the shared one), the
    pending ``stop_tts``."""

    def __init__(self, rec: Session, dialect: str, shared: _Shared | None):
        self.rec = rec
        self.dialect = dialect
        self.chunk = SERVER_CHUNK[dialect]
        self.shared = shared
        self.fifo = np.zeros(0, np.float32)
        self.voiced_ms = 0.0               # speech in the current utterance
        self.silent_samples = 0
        self.state = "idle"                # idle | dialog | triggered (Freeze-Omni after 'ss')
        self.chunks = 0                    # VAD chunks seen
        self.dead = False                  # VITA: the VAD thread died
        self.tts: deque = shared.tts if shared is not None else deque()
        self.turn: Turn | None = None
        self.playing_until = 0.0           # monotonic end of the audio sent so far
        self.stop_pending = False
        self.cut_turn: Turn | None = None  # the turn the pending stop_tts cuts
        self.reply_task: asyncio.Task | None = None
        self.voice = rec.script.voice()

    def segment_audio(self, k: int) -> np.ndarray:
        n = int(round(self.rec.script.segment_s * OUT_RATE))
        return self.rec.script.audio(self.voice, n, offset=k * n)

    def active(self, now: float) -> bool:
        """A reply queued, or sent and still playing on the client."""
        t = self.turn
        return t is not None and t.ended != "interrupted" and (
            t.ended == "queued" or now < self.playing_until)

    def interrupt(self, now: float) -> None:
        """``GlobalParams.interrupt()``: generation stopped, the queue emptied, then
        ``tts_over_time`` (a stop_tts on the next audio message), whether or not anything
        was playing."""
        if self.reply_task is not None:
            self.reply_task.cancel()
        if self.turn is not None and self.active(now):
            self.turn.ended = "interrupted"
            self.cut_turn = self.turn
        self.tts.clear()
        self.stop_pending = True

    async def queue_reply(self, turn: Turn, delay: float) -> None:
        await asyncio.sleep(delay)
        s = self.rec.script
        words = s.text.split()
        llm = 0
        if self.shared is not None:
            self.shared.answers += 1
            llm = 1 + (self.shared.answers - 1) % 2  # the two LLM processes take turns
        for k in range(s.segments):
            a, b = len(words) * k // s.segments, len(words) * (k + 1) // s.segments
            self.tts.append((self.segment_audio(k), " ".join(words[a:b]), llm, turn))
        turn.queued_at = time.monotonic()

    def feed(self, x: np.ndarray) -> None:
        """The VAD over whole server chunks (the FIFO's ``get(chunk_size)``)."""
        s = self.rec.script
        self.fifo = np.concatenate([self.fifo, x])
        while len(self.fifo) >= self.chunk:
            c, self.fifo = self.fifo[: self.chunk], self.fifo[self.chunk:]
            voiced = float(np.sqrt(np.mean(c.astype(np.float64) ** 2))) >= s.vad_rms
            ms = len(c) * 1000 / IN_RATE
            self.chunks += 1
            if self.dialect == "vita-1.5" and voiced and self.chunks == 1:
                self.dead = True
            if self.dead:
                continue
            if voiced:
                self.silent_samples = 0
                if self.state == "idle":
                    self.state, self.voiced_ms = "dialog", 0.0
                if self.state == "dialog":
                    self.voiced_ms += ms
                continue  # triggered: not heard, and the silence starts over
            if self.state == "idle":
                continue
            self.silent_samples += len(c)
            silent_ms = self.silent_samples * 1000 / IN_RATE
            if self.state == "triggered":
                if silent_ms >= s.vad_end_ms:
                    self.state = "idle"
                continue
            if silent_ms < s.silence_ms:
                continue
            self.state = "triggered" if self.dialect == "freeze-omni" else "idle"
            if self.voiced_ms < s.min_turn_ms:
                continue
            self.decide()

    def decide(self) -> None:
        """The end of the user's turn: Freeze-Omni's 'ss' (interrupt, then a new answer);
        VITA's request to the other LLM process (which stops the answering one)."""
        s = self.rec.script
        now = time.monotonic()
        if self.dialect == "freeze-omni":
            self.interrupt(now)
        elif self.turn is not None and self.active(now):
            if self.reply_task is not None:
                self.reply_task.cancel()
            self.turn.ended = "interrupted"
            self.cut_turn = self.turn
            mine = [e for e in self.tts if e[3] is self.turn]
            for e in mine:
                self.tts.remove(e)
        if s.max_turns is not None and len(self.rec.turns) >= s.max_turns:
            return
        self.turn = Turn(len(self.rec.turns), decided_at=now)
        self.rec.turns.append(self.turn)
        self.reply_task = asyncio.ensure_future(
            self.queue_reply(self.turn, s.answer_after_ms / 1000))


class FakeOmniServer(FakeHTTPServer):
    """``async with FakeOmniServer("vita-1.5", script) as server:`` -> ``server.url``."""

    def __init__(self, dialect: str = "freeze-omni", script: Script = Script(), *, tls=None,
                 ping_s: float | None = None):
        super().__init__(tls or self_signed_tls())  # HTTPS only, as both servers
        self.dialect = dialect
        self.script = script
        # engine.io's heartbeat (Flask-SocketIO 5.x: 25 s + 20 s), shorter for a hang test
        ping = {} if ping_s is None else {"ping_interval": ping_s, "ping_timeout": ping_s}
        self.sio = socketio.AsyncServer(async_mode="aiohttp", logger=False,
                                        engineio_logger=False, max_http_buffer_size=10**8,
                                        **ping)
        self.users: dict[str, _User] = {}
        self.shared = _Shared() if dialect == "vita-1.5" else None
        self.by_sid: dict[str, Session] = {}
        self._on(self.sio)

    def routes(self, app: web.Application) -> None:
        if self.script.hang:
            async def hang(request):
                self.requests += 1
                await asyncio.Event().wait()
            app.router.add_route("*", "/socket.io/", hang)
        else:
            self.sio.attach(app)

    def _on(self, sio: socketio.AsyncServer) -> None:
        @sio.event
        async def connect(sid, environ):
            rec = Session(len(self.sessions), sid, self.script)
            self.sessions.append(rec)
            self.by_sid[sid] = rec
            if len(self.users) >= self.script.max_users:
                rec.registered = False
                await sio.emit("too_many_users", to=sid)
                return
            self.users[sid] = _User(rec, self.dialect, self.shared)

        @sio.event
        async def disconnect(sid, *reason):
            self.by_sid[sid].disconnected = True
            user = self.users.pop(sid, None)
            if user is not None and user.reply_task is not None:
                user.reply_task.cancel()

        async def control(sid, name, data=None):
            rec = self.by_sid[sid]
            rec.received.append({"t": time.monotonic(), "event": name, "data": data})
            user = self.users.get(sid)
            if user is None:
                await sio.disconnect(sid)
                return None
            return user

        @sio.on("recording-started")
        async def recording_started(sid):
            user = await control(sid, "recording-started")
            if user is not None:
                for _ in range(2 if self.dialect == "freeze-omni" else 1):  # around interrupt()
                    await sio.emit("stop_tts", to=sid)
                if user.reply_task is not None:
                    user.reply_task.cancel()
                self.users[sid] = _User(user.rec, self.dialect, self.shared)

        @sio.on("recording-stopped")
        async def recording_stopped(sid):
            if await control(sid, "recording-stopped") is not None:
                await sio.emit("stop_tts", to=sid)

        @sio.on("prompt_text")
        async def prompt_text(sid, text):
            if await control(sid, "prompt_text", text) is not None:
                await sio.emit("prompt_success", to=sid)

        @sio.on("reset_state")
        async def reset_state(sid):
            await control(sid, "reset_state")

        @sio.on("audio")
        async def audio(sid, data):
            user = self.users.get(sid)
            if user is None:
                await sio.disconnect(sid)
                return
            rec = user.rec
            now = time.monotonic()
            if rec.t0_monotonic is None:
                rec.t0_monotonic = now
            pulled = bool(user.tts) and await self._pull(sid, user)
            if user.stop_pending:
                rec.stops_with_segment += pulled
                user.stop_pending = False
                if user.cut_turn is not None:
                    user.cut_turn.cut_at = time.monotonic()
                    user.cut_turn.cut_msg = rec.audio_messages
                    user.cut_turn = None
                await sio.emit("stop_tts", to=sid)
            body = json.loads(data)  # the real server parses a JSON string, then bytes()
            x = np.frombuffer(bytes(body["audio"]), dtype=np.int16).astype(np.float32) / 32768
            rec.audio_messages += 1
            rec.input_samples += len(x)
            s = rec.script
            in_ms = rec.input_samples * 1000 / IN_RATE
            if s.drop_after_ms is not None and in_ms >= s.drop_after_ms and not rec.dropped:
                rec.dropped = True
                await sio.disconnect(sid)
                return
            if s.out_time_after_ms is not None and in_ms >= s.out_time_after_ms:
                await sio.emit("out_time", to=sid)
                self.users.pop(sid, None)
                return
            user.feed(x)

    async def _pull(self, sid: str, user: _User) -> bool:
        """The pull: one queued segment per incoming message; whether audio went out."""
        seg, text, llm, turn = user.tts.popleft()
        sh = self.shared
        if sh is not None:  # VITA: the other LLM process's output replaces a segment
            switched = sh.last_llm not in (0, llm)
            sh.last_llm = llm
            if switched:
                if user.cut_turn is not None:
                    user.cut_turn.cut_at = time.monotonic()
                    user.cut_turn = None
                await self.sio.emit("stop_tts", to=sid)
                return False
        pcm = np.round(np.clip(seg, -1, 1) * 32767).astype("<i2").tobytes()
        sent = time.monotonic()
        await self.sio.emit("audio", pcm, to=sid)
        turn.sends.append((sent, len(seg)))
        turn.pulled_by.append(user.rec.index)
        turn.send_msgs.append(user.rec.audio_messages)  # as cut_msg: before this one is counted
        user.playing_until = max(user.playing_until, sent) + len(seg) / OUT_RATE
        if not any(e[3] is turn for e in user.tts):
            turn.ended = "sent"
        if sh is not None and text and text != sh.last_text:
            await self.sio.emit("response_text", {"text": text}, to=sid)
            user.rec.texts.append((time.monotonic(), text))
            sh.last_text = text
        return True


async def _main(argv: list[str]) -> None:
    parser = standalone_parser(__doc__)
    parser.add_argument("--dialect", default="freeze-omni", choices=sorted(SERVER_CHUNK))
    parser.add_argument("--ping", type=float, help="engine.io ping interval and timeout (s)")
    args = parser.parse_args(argv)
    server = FakeOmniServer(args.dialect, Script.from_json(args.script), ping_s=args.ping)
    await serve_until_stdin_closes(server, args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
