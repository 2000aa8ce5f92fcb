"""A protocol-faithful fake of Lychee-FD's realtime HTTP API (``lychee_fd/app.py``,
``register_realtime_session_routes``), on 127.0.0.1.

Routes and rules kept from app.py: ``POST /api/realtime/session/start`` (503 while "models are
not loaded"; ``infer_window_ms`` clamped to >= 160) -> ``session_id``, ``infer_window_ms``;
``POST .../{id}/chunk`` with a WAV body (400 for an empty or unreadable one, 404 for an unknown
session, 409 once stopping) -> ``{ok, received_samples, queued_ms}``; ``GET .../{id}/events``:
``event: TYPE\\ndata: JSON\\n\\n`` with a ``heartbeat`` every 0.5 s while idle, ending after
``done``; ``POST .../{id}/stop`` -> ``{ok}``, then ``done``.

Instead of a model a ``Script``: an energy VAD per received chunk; ``silence_ms`` after the
user's speech, ``answer_after_ms`` later, a turn: the first ``assistant_text`` delta, then
``state_change`` L->S (app.py pushes a round's text as it is decoded and the round's state change
at its end, from ``round_trace``; states in capitals), ``audio_chunk_pcm`` pieces of
``piece_ms`` sent at ``pace`` x real time with the other deltas in proportion, ``state_change``
S->L. User speech while the turn is still playing interrupts it (``state_change`` with
``interrupt``, then ``audio_interrupt``). Ground truth on ``time.monotonic()``: each piece's
send time and length, each interruption's send time.

Run standalone::  python tests/fakes/lychee_server.py [--script JSON] [--log FILE]
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from aiohttp import web

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_http import FakeHTTPServer, SpokenScript
from fake_ws import serve_until_stdin_closes, standalone_parser

IN_RATE = 16_000
OUT_RATE = 24_000
API = "/api/realtime/session"


@dataclass(frozen=True)
class Script(SpokenScript):
    silence_ms: float = 400.0
    answer_after_ms: float = 150.0
    speak_s: float = 1.0
    piece_ms: float = 200.0
    pace: float = 2.0                  # x real time (0: all at once)
    vad_rms: float = 0.02
    max_turns: int | None = None
    loading: bool = False              # session/start -> 503 "Models are not loaded yet."
    error_after_ms: float | None = None  # an `error` event once this much input arrived
    hang_after_ms: float | None = None   # the event stream goes silent (no heartbeat either)
    drop_after_ms: float | None = None   # the event stream's connection is aborted


@dataclass
class Turn:
    index: int
    sends: list[tuple[float, int]] = field(default_factory=list)
    cut_at: float | None = None
    ended: str = "speaking"


@dataclass
class Session:
    index: int
    session_id: str
    script: Script
    start_body: dict[str, Any]
    window_ms: int
    chunks: list[dict[str, Any]] = field(default_factory=list)  # {t, samples, rate}
    turns: list[Turn] = field(default_factory=list)
    t0_monotonic: float | None = None
    stopped: bool = False
    dropped: bool = False
    input_samples: int = 0

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "tag": self.script.tag, "t0_monotonic": self.t0_monotonic,
                "chunks": len(self.chunks), "stopped": self.stopped,
                "turns": [t.__dict__ for t in self.turns]}


class _Live:
    """A session's server-side state: the event queue and the scripted turn."""

    def __init__(self, rec: Session):
        self.rec = rec
        self.queue: asyncio.Queue = asyncio.Queue()
        self.voiced_any = False
        self.silent_ms = 0.0
        self.turn: Turn | None = None
        self.task: asyncio.Task | None = None
        self.play_end = 0.0
        self.flags: set[str] = set()
        self.voice = rec.script.voice()

    def push(self, kind: str, **payload: Any) -> None:
        self.queue.put_nowait((kind, {"type": kind, **payload}))

    def active(self) -> bool:
        """A turn still being sent, or still playing on the client (all sent faster than
        real time): user speech now interrupts it."""
        t = self.turn
        return t is not None and t.cut_at is None and (t.ended == "speaking"
                                                        or time.monotonic() < self.play_end)

    def on_chunk(self, x: np.ndarray) -> None:
        s = self.rec.script
        self.rec.input_samples += len(x)
        in_ms = self.rec.input_samples * 1000 / IN_RATE
        for name in ("error", "hang", "drop"):
            limit = getattr(s, f"{name}_after_ms")
            if limit is not None and in_ms >= limit and name not in self.flags:
                self.flags.add(name)
                if name == "error":
                    self.push("error", error="CUDA out of memory (scripted)")
        n = len(x) // 320
        rms = np.sqrt((x[: n * 320].astype(np.float64).reshape(n, 320) ** 2).mean(axis=1)) \
            if n else np.zeros(0)
        voiced = bool((rms >= s.vad_rms).any())
        if voiced:
            if self.active():
                self.interrupt()
            self.voiced_any, self.silent_ms = True, 0.0
            return
        if not self.voiced_any:
            return
        self.silent_ms += len(x) * 1000 / IN_RATE
        if self.silent_ms < s.silence_ms:
            return
        self.voiced_any, self.silent_ms = False, 0.0
        if s.max_turns is not None and len(self.rec.turns) >= s.max_turns:
            return
        self.turn = Turn(len(self.rec.turns))
        self.rec.turns.append(self.turn)
        self.task = asyncio.ensure_future(self.speak(self.turn))

    def interrupt(self) -> None:
        if self.task is not None:
            self.task.cancel()
        turn = self.turn
        turn.ended = "interrupted"
        turn.cut_at = time.monotonic()
        self.play_end = 0.0
        self.push("state_change", **{"from": "S", "to": "L", "interrupt": True,
                                     "round_id": turn.index})
        self.push("audio_interrupt", reason="interrupt", round_id=turn.index,
                  dropped_audio_events=0)

    async def speak(self, turn: Turn) -> None:
        s = self.rec.script
        await asyncio.sleep(s.answer_after_ms / 1000)
        words = s.text.split()
        said = 1 if words else 0  # the round's text goes out before its state change
        if said:
            self.push("assistant_text", text=words[0] + " ", delta=words[0] + " ",
                      snapshot=words[0], is_final=len(words) == 1, round_id=turn.index,
                      event_id=f"{turn.index}:response", seq=0)
        self.push("state_change", **{"from": "L", "to": "S", "interrupt": False,
                                     "round_id": turn.index})
        total = int(round(s.speak_s * OUT_RATE))
        step = int(round(s.piece_ms / 1000 * OUT_RATE))
        audio = s.audio(self.voice, total)
        pieces = [audio[i:i + step] for i in range(0, total, step)]
        for k, piece in enumerate(pieces):
            sent = time.monotonic()
            pcm = np.round(np.clip(piece, -1, 1) * 32767).astype("<i2").tobytes()
            self.push("audio_chunk_pcm", pcm_format="s16le", sample_rate=OUT_RATE,
                      num_channels=1, num_samples=len(piece),
                      pcm_b64=base64.b64encode(pcm).decode("ascii"), round_id=turn.index)
            turn.sends.append((sent, len(piece)))
            self.play_end = max(self.play_end, sent) + len(piece) / OUT_RATE
            due = len(words) * (k + 1) // len(pieces)
            if due > said:
                delta = " ".join(words[said:due]) + ("" if due == len(words) else " ")
                self.push("assistant_text", text=delta, delta=delta,
                          snapshot=" ".join(words[:due]), is_final=due == len(words),
                          round_id=turn.index, event_id=f"{turn.index}:response", seq=k)
                said = due
            await asyncio.sleep(len(piece) / OUT_RATE / s.pace if s.pace > 0 else 0)
        turn.ended = "done"
        self.push("state_change", **{"from": "S", "to": "L", "interrupt": False,
                                     "round_id": turn.index})


class FakeLycheeServer(FakeHTTPServer):
    """``async with FakeLycheeServer(script) as server:`` -> ``server.url`` (http://...)."""

    def __init__(self, script: Script = Script(), *, tls=None):
        super().__init__(tls)
        self.script = script
        self.live: dict[str, _Live] = {}

    def routes(self, app: web.Application) -> None:
        app.router.add_post(f"{API}/start", self.start)
        app.router.add_post(f"{API}/{{sid}}/chunk", self.chunk)
        app.router.add_get(f"{API}/{{sid}}/events", self.events)
        app.router.add_post(f"{API}/{{sid}}/stop", self.stop)

    def _live(self, request: web.Request) -> _Live:
        self.requests += 1
        live = self.live.get(request.match_info["sid"])
        if live is None:
            raise web.HTTPNotFound(text=json.dumps({"detail": "Unknown session"}),
                                   content_type="application/json")
        return live

    async def start(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.script.loading:
            raise web.HTTPServiceUnavailable(
                text=json.dumps({"detail": "Models are not loaded yet."}),
                content_type="application/json")
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        script = self.script
        if isinstance(body.get("prompt_voice"), str) and body["prompt_voice"].startswith("SCRIPT "):
            script = Script.from_json(body["prompt_voice"][len("SCRIPT "):])
        window = max(160, int(body.get("infer_window_ms", 400)))
        rec = Session(len(self.sessions), uuid.uuid4().hex, script, body, window)
        self.sessions.append(rec)
        live = _Live(rec)
        self.live[rec.session_id] = live
        live.push("status", status="Realtime session started; waiting for audio chunks...")
        return web.json_response({"session_id": rec.session_id, "infer_window_ms": window,
                                  "chunk_size_ms": window})

    async def chunk(self, request: web.Request) -> web.Response:
        live = self._live(request)
        raw = await request.read()
        if not raw:
            raise web.HTTPBadRequest(text=json.dumps({"detail": "Empty chunk body."}),
                                     content_type="application/json")
        try:
            x, sr = sf.read(io.BytesIO(raw), dtype="float32")
        except Exception as exc:
            raise web.HTTPBadRequest(text=json.dumps({"detail": f"Invalid wav chunk: {exc}"}),
                                     content_type="application/json")
        if live.rec.stopped:
            raise web.HTTPConflict(text=json.dumps({"detail": "Session is stopping."}),
                                   content_type="application/json")
        now = time.monotonic()
        if live.rec.t0_monotonic is None:
            live.rec.t0_monotonic = now
        live.rec.chunks.append({"t": now, "samples": len(x), "rate": int(sr),
                                "sent_header": request.headers.get(
                                    "X-Client-Chunk-Sent-Epoch-Ms")})
        live.on_chunk(np.asarray(x, np.float32))
        return web.json_response({"ok": True, "session_id": live.rec.session_id,
                                  "received_samples": len(x), "queued_ms": 0})

    async def events(self, request: web.Request) -> web.StreamResponse:
        live = self._live(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        while True:
            if "hang" in live.flags:
                await asyncio.Event().wait()  # a stuck server: not even a heartbeat
            if "drop" in live.flags:
                live.rec.dropped = True
                request.transport.abort()
                return resp
            try:
                kind, payload = await asyncio.wait_for(live.queue.get(), 0.5)
            except asyncio.TimeoutError:
                kind, payload = "heartbeat", {}
            if "hang" in live.flags or "drop" in live.flags:
                continue
            await resp.write(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())
            if kind == "done":
                return resp

    async def stop(self, request: web.Request) -> web.Response:
        live = self._live(request)
        live.rec.stopped = True
        if live.task is not None:
            live.task.cancel()
        live.push("status", status="Realtime session is stopping...")
        live.push("done", session_id=live.rec.session_id)
        return web.json_response({"ok": True, "session_id": live.rec.session_id})


async def _main(argv: list[str]) -> None:
    args = standalone_parser(__doc__).parse_args(argv)
    await serve_until_stdin_closes(FakeLycheeServer(Script.from_json(args.script)), args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
