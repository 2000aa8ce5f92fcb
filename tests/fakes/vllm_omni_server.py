"""A protocol-faithful fake of vLLM-Omni's full-duplex Realtime route, on 127.0.0.1.

Built from vLLM-Omni's wire contract (docs/serving/realtime_duplex_api.md: the capability
table, the event catalogue and its JSON examples) and its client (vllm_omni/clients/duplex.py):
``WS /v1/realtime?duplex=1`` (alias ``/v1/duplex``); ``session.update`` opens a session and
is answered by ``session.created`` with ``resume_token``, the server-allocated id and
``session.capabilities``; every server event carries ``server_event_seq``; admission beyond
``max_sessions`` is an ``error`` (``rate_limit_error`` / ``resource_exhausted``,
``duplex_session_capacity_exhausted: limit=N``), and ``http_503`` refuses handshakes with HTTP
503 first; ``input_audio_buffer.append`` (base64 pcm16 / pcm_f32le, ``sample_rate_hz``);
``response.created`` -> ``response.speak`` -> one ``response.output_audio.delta`` (24 kHz
pcm16, ``metadata``) and one ``response.output_audio_transcript.delta`` per unit ->
``response.output_audio.done`` ... ``response.done`` -> ``rate_limits.updated``; id-less
``response.listen`` beats while the model listens; ``overlap.decision`` when the user talks
over a response; ``playback.ack`` -> ``playback.acknowledged`` (the ledger); ``session.resume``
-> ``session.resumed`` within ``grace_s`` of a drop; ``session.close`` -> ``session.closed``.

Instead of a model it follows a ``Script``: it decides at each unit boundary
(``chunk_period_ms`` of appended audio): it listens while an energy VAD hears the user and
speaks ``speak_s`` of a tone (or a speech file) ``answer_after_ms`` after the user stopped.
When the user talks over a response, ``overlap_policy`` decides, as the contract says:
``barge_in_on_speech`` (needs ``supports_barge_in``) cancels at once (``overlap.decision``
``barge_in``, ``response.done`` cancelled, reason ``barge_in``); ``listen_only`` (the
MiniCPM-o preset) reports ``overlap.decision`` ``listen`` and the model itself listens at the
next unit boundary (``response.listen`` with the response's id, then ``response.done``: our
reading of a model-native stop).

Ground truth per session: when each audio delta was sent (``time.monotonic()``, the test's
loop clock), each turn's first audio and cut, every ack received.

Run standalone (its own process, for the plugin tests)::

    python tests/fakes/vllm_omni_server.py [--script JSON] [--log FILE]
    # prints "PORT <n>", serves until stdin closes
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

if str(Path(__file__).resolve().parent) not in sys.path:  # fake_ws.py is beside this file
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_ws import (
    OUT_RATE,
    FakeServer,
    JsonScript,
    SpeakingConnection,
    b64_pcm16,
    scripted_reply,
    serve_until_stdin_closes,
    standalone_parser,
)

IN_RATE = 16_000
FRAME = IN_RATE * 20 // 1000  # the VAD's 20 ms frame


@dataclass(frozen=True)
class Script(JsonScript):
    chunk_period_ms: int = 1000       # the model unit (MiniCPM-o 4.5: 1000)
    answer_after_ms: float = 500.0    # silence after the user's speech before speaking
    speak_s: float = 1.0
    pace: float = 1.0                 # units generated per unit of real time (0: all at once)
    text: str = "Sure, here is a short answer for you."
    tone_hz: float = 440.0
    amplitude: float = 0.3
    speech_file: str | None = None
    transcript_first: bool = False
    vad_rms: float = 0.02
    max_turns: int | None = None
    supports_barge_in: bool = True
    supports_session_resume: bool = True
    supports_multi_session: bool = True
    supports_playback_ack: bool = True
    supports_audio_truncate: bool = True
    max_sessions: int = 4             # duplex_session.max_sessions
    advertise_max_sessions: bool = False  # put it in the capabilities (not documented)
    http_503: int = 0                 # refuse this many handshakes with HTTP 503 first
    drop_after_ms: float | None = None  # abort the TCP connection after this much input
    grace_s: float = 30.0             # disconnect_grace_s
    require_ref_audio: bool = False   # the MiniCPM-o preset's ref_audio_required
    tag: str | None = None


@dataclass
class Turn:
    index: int
    response_id: str
    audio_start: float | None = None  # server t of the first delta
    first_audio_at: float | None = None  # time.monotonic() of the first delta
    audio_s: float = 0.0
    ended: str = "speaking"           # completed | barge_in | model_listen
    cut_at: float | None = None       # time.monotonic() the cutting event was sent
    stop: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Session:
    index: int
    session_id: str
    script: Script
    resume_token: str
    update: dict[str, Any] | None = None
    received: list[dict[str, Any]] = field(default_factory=list)  # {t, type, ...} no audio
    sent: list[dict[str, Any]] = field(default_factory=list)      # {t, type[, audio_ms]}
    turns: list[Turn] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)
    t0_monotonic: float | None = None
    input_ms: float = 0.0
    closed: str | None = None         # the session.closed reason
    dropped: bool = False
    resumed: bool = False
    seq: int = 0

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "tag": self.script.tag, "session_id": self.session_id,
                "t0_monotonic": self.t0_monotonic, "closed": self.closed,
                "dropped": self.dropped, "resumed": self.resumed, "acks": self.acks,
                "sent": self.sent,
                "turns": [{k: v for k, v in t.__dict__.items() if k != "stop"}
                          for t in self.turns]}


def capabilities(script: Script) -> dict[str, Any]:
    caps = {"implementation_level": "model_native_duplex", "supports_input_append": True,
            "supports_barge_in": script.supports_barge_in,
            "supports_session_resume": script.supports_session_resume,
            "supports_session_lease": True,
            "supports_multi_session": script.supports_multi_session,
            "supports_playback_ack": script.supports_playback_ack,
            "supports_audio_truncate": script.supports_audio_truncate,
            "chunk_period_ms": script.chunk_period_ms,
            "input_modes": ["append_audio_chunk"],
            "signal_sources": ["model_native", "client_event", "server_policy"],
            "target_barge_in_latency_ms": None}
    if script.advertise_max_sessions:
        caps["max_sessions"] = script.max_sessions
    return caps


def error(code: str, message: str, kind: str = "invalid_request_error",
          event_id: str | None = None) -> dict[str, Any]:
    err = {"type": kind, "code": code, "message": message}
    if event_id:
        err["event_id"] = event_id
    return {"type": "error", "error": err}


class _Connection(SpeakingConnection):
    def __init__(self, ws: ServerConnection, rec: Session, server: "FakeVllmOmniServer"):
        super().__init__(ws, rec)
        self.server = server
        self.turn: Turn | None = None
        self.heard_speech = False
        self.voiced_end_ms = 0.0   # input ms where the last voiced frame ended
        self.overlap_at: float | None = None  # input ms the user first talked over the turn
        self.units = 0
        self.listening_sent = False
        self.voice = scripted_reply(rec.script)

    async def emit(self, msg: dict[str, Any], audio_ms: float | None = None) -> None:
        self.rec.seq += 1
        msg["server_event_seq"] = self.rec.seq
        entry: dict[str, Any] = {"t": time.monotonic(), "type": msg["type"]}
        if audio_ms is not None:
            entry["audio_ms"] = audio_ms
        await self.ws.send(json.dumps(msg))
        self.rec.sent.append(entry)

    async def send_audio(self, turn: Turn, chunk: np.ndarray, seconds: float) -> None:
        if turn.first_audio_at is None:
            turn.first_audio_at = time.monotonic()
        turn.audio_s += seconds
        rid = turn.response_id
        await self.emit({"type": "response.output_audio.delta", "response_id": rid,
                         "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                         "delta": b64_pcm16(chunk), "format": "pcm16",
                         "sample_rate_hz": OUT_RATE,
                         "metadata": {"session_id": self.rec.session_id, "epoch": 0,
                                      "model_speak": True, "end_of_turn": False,
                                      "audio_duration_ms": round(turn.audio_s * 1000)}},
                        audio_ms=seconds * 1000)

    async def send_words(self, turn: Turn, piece: str) -> None:
        rid = turn.response_id
        await self.emit({"type": "response.output_audio_transcript.delta", "response_id": rid,
                         "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                         "delta": piece})

    # -- the model --

    def hear(self, x: np.ndarray) -> bool:
        """The energy VAD over the new input; True when any frame of it was voiced."""
        voiced = False
        for level, start_ms in self.vad_levels(x, FRAME, np.float64):
            if level >= self.rec.script.vad_rms:
                voiced = True
                self.heard_speech = True
                self.voiced_end_ms = start_ms + 20
        return voiced

    async def on_append(self, msg: dict[str, Any]) -> None:
        fmt = msg.get("format") or msg.get("input_audio_format") or "pcm16"
        if msg.get("sample_rate_hz", IN_RATE) != IN_RATE or fmt not in ("pcm16", "pcm_f32le"):
            return await self.emit(error("invalid_audio_format", "expected 16 kHz pcm16"))
        raw = base64.b64decode(msg.get("audio") or "")
        x = (np.frombuffer(raw, "<i2").astype(np.float32) / 32768 if fmt == "pcm16"
             else np.frombuffer(raw, "<f4").astype(np.float32))
        if self.rec.t0_monotonic is None:
            self.rec.t0_monotonic = time.monotonic()
            self.start_clock()
        before = self.rec.input_ms
        self.rec.input_ms += 1000 * len(x) / IN_RATE
        script = self.rec.script
        if script.drop_after_ms is not None and not self.rec.dropped \
                and self.rec.input_ms >= script.drop_after_ms:
            self.server.detach(self.rec)
            self.ws.transport.abort()
            return
        voiced = self.hear(x)
        if voiced and self.turn is not None and self.overlap_at is None:
            await self.overlap()
        period = script.chunk_period_ms
        for boundary in range(int(before // period) + 1, int(self.rec.input_ms // period) + 1):
            self.units = boundary
            await self.unit_boundary()

    async def overlap(self) -> None:
        """The user talks over the response: the session's overlap policy decides."""
        self.overlap_at = self.rec.input_ms
        policy = (self.rec.update or {}).get("overlap_policy") or "listen_only"
        if policy == "barge_in_on_speech":
            await self.emit({"type": "overlap.decision", "session_id": self.rec.session_id,
                             "epoch": 0, "policy": policy, "action": "barge_in",
                             "reason": "server_vad_utterance_active"})
            await self.end_turn("barge_in", "cancelled")
        else:
            await self.emit({"type": "overlap.decision", "session_id": self.rec.session_id,
                             "epoch": 0, "policy": policy, "action": "listen",
                             "reason": "long_overlap_speech",
                             "metadata": {"buffer_audio": True, "force_listen": True}})

    async def unit_boundary(self) -> None:
        """The model's decision for the unit that just closed."""
        script = self.rec.script
        if self.turn is not None:
            if self.overlap_at is not None:  # model-native: it listens now
                rid = self.turn.response_id
                await self.emit({"type": "response.listen", "response_id": rid,
                                 "session_id": self.rec.session_id, "epoch": 0,
                                 "response": {"object": "realtime.response",
                                              "status": "listening",
                                              "metadata": {"reason": "model_listen"}}})
                await self.end_turn("model_listen", "completed")
            return
        silent_ms = self.rec.input_ms - self.voiced_end_ms
        turns_left = script.max_turns is None or len(self.rec.turns) < script.max_turns
        if self.heard_speech and silent_ms >= script.answer_after_ms and turns_left:
            self.heard_speech = False
            self.listening_sent = False
            await self.start_turn()
            return
        await self.emit({"type": "response.listen", "session_id": self.rec.session_id,
                         "epoch": 0, "response": {"object": "realtime.response",
                                                  "status": "listening"}})

    async def start_turn(self) -> None:
        rid = f"resp_{uuid.uuid4().hex[:8]}"
        turn = Turn(len(self.rec.turns), rid)
        self.rec.turns.append(turn)
        self.turn, self.overlap_at = turn, None
        item = {"id": f"item_{rid}", "object": "realtime.item", "type": "message",
                "role": "assistant", "status": "in_progress", "content": []}
        await self.emit({"type": "response.created", "response_id": rid,
                         "response": {"id": rid, "object": "realtime.response",
                                      "status": "in_progress", "output": []}})
        await self.emit({"type": "response.output_item.added", "response_id": rid,
                         "output_index": 0, "item": item})
        await self.emit({"type": "response.speak", "response_id": rid,
                         "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                         "metadata": {"session_id": self.rec.session_id, "epoch": 0,
                                      "model_speak": True}})
        self.spawn(self.speak(turn))

    async def speak(self, turn: Turn) -> None:
        script = self.rec.script
        unit = script.chunk_period_ms
        try:
            done = await self.stream_turn(turn, self.voice, OUT_RATE, unit, script)
        except ConnectionClosed:
            return
        if done and self.turn is turn:
            await self.end_turn("completed", "completed")

    async def end_turn(self, why: str, status: str) -> None:
        turn = self.turn
        if turn is None:
            return
        self.turn = None
        turn.ended = why
        turn.stop.set()
        if why != "completed":
            turn.cut_at = time.monotonic()
        rid = turn.response_id
        base = {"response_id": rid, "item_id": f"item_{rid}", "output_index": 0,
                "content_index": 0}
        if status == "completed":
            await self.emit({"type": "response.output_audio.done", **base})
            await self.emit({"type": "response.output_audio_transcript.done", **base,
                             "transcript": self.rec.script.text})
        details = None if why == "completed" else {"type": "cancelled", "reason": why}
        await self.emit({"type": "response.done", "response_id": rid,
                         "response": {"id": rid, "object": "realtime.response",
                                      "status": status, "status_details": details,
                                      "output": []}})
        await self.emit({"type": "rate_limits.updated", "rate_limits": []})

    # -- the session's messages --

    async def on_message(self, msg: dict[str, Any]) -> bool:
        kind = msg.get("type")
        self.rec.received.append({"t": time.monotonic(),
                                  **{k: v for k, v in msg.items() if k != "audio"}})
        if kind == "input_audio_buffer.append":
            await self.on_append(msg)
        elif kind == "playback.ack":
            self.rec.acks.append({"t": time.monotonic(), "response_id": msg.get("response_id"),
                                  "played_ms": msg.get("played_ms"),
                                  "truncate": bool(msg.get("truncate"))})
            await self.emit({"type": "playback.acknowledged",
                             "event": {"type": "playback.acknowledged",
                                       "session_id": self.rec.session_id,
                                       "item_id": msg.get("item_id"),
                                       "played_ms": msg.get("played_ms"),
                                       "committed_ms": msg.get("committed_ms"),
                                       "truncate": bool(msg.get("truncate")),
                                       "history_committed": bool(msg.get("truncate"))}})
        elif kind == "session.event_ack":
            pass
        elif kind == "session.close":
            await self.end_turn("closed", "cancelled")
            self.rec.closed = "client_close"
            await self.emit({"type": "session.closed", "session_id": self.rec.session_id,
                             "epoch": 0, "reason": "client_close"})
            self.server.release(self.rec)
            return False
        else:
            await self.emit(error("unknown_event", f"Unknown event type: {kind}",
                                  event_id=msg.get("event_id")))
        return True

    async def run(self) -> None:
        try:
            async for raw in self.ws:
                if not await self.on_message(json.loads(raw)):
                    break
        except ConnectionClosed:
            if self.rec.closed is None:
                self.server.detach(self.rec)
        finally:
            self.cancel_tasks()


class FakeVllmOmniServer(FakeServer):
    """``async with FakeVllmOmniServer(script) as server:`` -> ``server.url`` (ws://...)."""

    def __init__(self, script: Script = Script()):
        super().__init__()
        self.script = script
        self.open: dict[str, Session] = {}      # session id -> attached or detached session
        self.detached: dict[str, float] = {}    # session id -> monotonic deadline of its grace
        self.refused = 0                        # admission refusals (error events)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime?duplex=1"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        path = request.path.split("?")[0].rstrip("/")
        if path not in ("/v1/realtime", "/v1/duplex"):
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if self.handshakes <= self.script.http_503:
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "overloaded\n")
        return None

    def reap(self) -> None:
        now = time.monotonic()
        for sid, deadline in list(self.detached.items()):
            if now >= deadline:
                del self.detached[sid]
                self.open.pop(sid, None)

    def detach(self, rec: Session) -> None:
        rec.dropped = True
        self.detached[rec.session_id] = time.monotonic() + rec.script.grace_s

    def release(self, rec: Session) -> None:
        self.open.pop(rec.session_id, None)
        self.detached.pop(rec.session_id, None)

    async def _handle(self, ws: ServerConnection) -> None:
        self.reap()
        raw = await ws.recv()
        first = json.loads(raw)
        if first.get("type") == "session.resume":
            return await self._resume(ws, first)
        if first.get("type") != "session.update":
            await ws.send(json.dumps({"type": "error", "error": "expected session.update",
                                      "code": "bad_event"}))
            return
        session = first.get("session") or {}
        script = self.script
        if session.get("instructions", "").startswith("SCRIPT "):  # per-session behaviour
            script = Script.from_json(session["instructions"][len("SCRIPT "):])
        if len(self.open) >= script.max_sessions:
            self.refused += 1
            await ws.send(json.dumps(error(
                "resource_exhausted", f"duplex_session_capacity_exhausted: "
                f"limit={script.max_sessions}", kind="rate_limit_error")))
            return
        if script.require_ref_audio and not session.get("ref_audio"):
            await ws.send(json.dumps({"type": "error", "error": "ref_audio is required",
                                      "code": "ref_audio_required"}))
            return
        if session.get("overlap_policy") == "barge_in_on_speech" and not script.supports_barge_in:
            await ws.send(json.dumps(error("unsupported_overlap_policy",
                                           "barge_in_on_speech needs barge-in")))
            return
        rec = Session(len(self.sessions), f"duplex-{uuid.uuid4().hex[:12]}", script,
                      f"rt_{uuid.uuid4().hex}", update=session)
        self.sessions.append(rec)
        self.open[rec.session_id] = rec
        conn = _Connection(ws, rec, self)
        await conn.emit({"type": "session.created", "attachment_generation": 1,
                         "resume_token": rec.resume_token, "session": self.session_object(
                             rec, session)})
        await conn.emit({"type": "session.updated",
                         "session": self.session_object(rec, session)})
        await conn.run()

    @staticmethod
    def session_object(rec: Session, asked: dict[str, Any]) -> dict[str, Any]:
        return {"object": "realtime.session", "type": "realtime", "id": rec.session_id,
                "model": asked.get("model") or "openbmb/MiniCPM-o-4_5", "state": "open",
                "turn_state": "idle", "epoch": 0, "turn_id": 0,
                "modalities": ["audio", "text"], "input_audio_format": "pcm16",
                "output_audio_format": "pcm16",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": IN_RATE},
                                    "sample_rate_hz": IN_RATE},
                          "output": {"format": {"type": "audio/pcm", "rate": OUT_RATE}}},
                "overlap_policy": asked.get("overlap_policy") or "listen_only",
                "playback_commit_policy": asked.get("playback_commit_policy") or "ack_only",
                "playback": {"generated_ms": 0, "sent_ms": 0, "played_ms": 0,
                             "committed_ms": 0},
                "capabilities": capabilities(rec.script)}

    async def _resume(self, ws: ServerConnection, msg: dict[str, Any]) -> None:
        sid = msg.get("session_id")
        rec = self.open.get(sid)
        if rec is None or sid not in self.detached:
            await ws.send(json.dumps({"type": "error", "code": "session_resume_expired",
                                      "error": f"Unknown or expired duplex session: {sid}"}))
            return
        if msg.get("resume_token") != rec.resume_token:
            await ws.send(json.dumps({"type": "error", "code": "invalid_resume_token",
                                      "error": "Invalid duplex session resume token"}))
            return
        del self.detached[sid]
        rec.resumed = True
        rec.resume_token = f"rt_{uuid.uuid4().hex}"
        conn = _Connection(ws, rec, self)
        await conn.emit({"type": "session.resumed", "session_id": sid,
                         "attachment_generation": 2, "resume_token": rec.resume_token,
                         "session": {"id": sid, "state": "open"}})
        await conn.run()


async def _main(argv: list[str]) -> None:
    args = standalone_parser(__doc__).parse_args(argv)
    await serve_until_stdin_closes(FakeVllmOmniServer(Script.from_json(args.script)), args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
