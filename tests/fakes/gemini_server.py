"""A protocol-faithful fake of the Gemini Live API (BidiGenerateContent) on 127.0.0.1, over TLS.

The real ``google-genai`` SDK connects to it unchanged: with an API key it always upgrades the
base URL to ``wss://`` and opens
``/ws/google.ai.generativelanguage.<version>.GenerativeService.BidiGenerateContent`` with the
key in the ``x-goog-api-key`` header. So the fake serves TLS with a throw-away certificate for
127.0.0.1 from ``trustme``; the client trusts it through ``SSL_CERT_FILE`` (which the SDK
reads when it builds its websocket SSL context).

Wire protocol (JSON text frames, as the public API reference describes them):

* client ``{"setup": {...}}`` first, answered by ``{"setupComplete": {}}``. Field names are
  accepted in camelCase and snake_case, as the real (protobuf JSON) server does; the SDK
  mixes both.
* client ``{"realtimeInput": {"audio": {"data": b64, "mimeType": "audio/pcm;rate=16000"}}}``:
  16 kHz pcm16 input. A simple energy VAD (20 ms frames) stands in for the provider's
  automatic activity detection; its ``silenceDurationMs`` comes from the setup.
  ``activityStart`` / ``activityEnd`` work when automatic detection is disabled.
* server ``{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType":
  "audio/pcm;rate=24000", "data": b64}}]}}}`` (24 kHz pcm16, sent faster than real time),
  ``{"serverContent": {"outputTranscription": {"text": ...}}}``, then
  ``generationComplete``, then ``turnComplete`` with ``usageMetadata``.
* barge-in: the user starting to speak while the model is still *generating* gets
  ``{"serverContent": {"interrupted": true}}`` and the rest of the turn is never sent. Once
  generation is complete there is nothing to interrupt (no message), as with the real API.
* ``goAway`` with ``timeLeft``, a dropped TCP connection, and close frames with the codes the
  real service uses (1007 invalid argument, 1008 policy / bad key, 1011 internal or
  RESOURCE_EXHAUSTED) are scriptable.

Behaviour is scripted (``Script``), per server or per session with a system instruction
``SCRIPT {json}`` (lets concurrent trials differ). Server time ``t`` = seconds since the first
input audio arrived. Each session records its ground truth (when each turn's first audio was
sent, how much was sent, when it was interrupted).

Run standalone (for the end-to-end plugin test, in its own process)::

    python tests/fakes/gemini_server.py --ca-out CA.pem [--script JSON] [--log FILE]
    # prints "PORT <n>", serves until stdin closes, then writes each session's ground truth
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
from dataclasses import dataclass, field, fields
from http import HTTPStatus
from pathlib import Path
from typing import Any, Callable

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
    energy_bounds,  # noqa: F401  (tests use it from here)
    pause,
    scripted_reply,
    serve_until_stdin_closes,
    speech,  # noqa: F401  (tests use it from here)
    standalone_parser,
)

IN_RATE = 16_000
FRAME = IN_RATE // 50  # 20 ms VAD frames
PATH_PREFIX = "/ws/google.ai.generativelanguage."
PATH_SUFFIX = ".GenerativeService.BidiGenerateContent"
AUDIO_TOKENS_PER_S = 32  # the Gemini API's documented audio token rate


@dataclass(frozen=True)
class Script(JsonScript):
    answer_after_ms: float = 400.0   # first audio this long after the user's speech ended
    speak_s: float = 1.0             # audio length of each turn
    text: str = "Sure, here is a short answer for you."
    chunk_ms: float = 40.0           # audio per modelTurn message
    pace: float = 4.0                # send speed, multiple of real time (0 = all at once)
    transcript_first: bool = False   # all transcription before any audio (else interleaved)
    max_turns: int | None = None
    tone_hz: float = 440.0
    speech_file: str | None = None   # speak this recording (real speech for a VAD), not a tone
    amplitude: float = 0.3
    vad_rms: float = 0.02            # energy VAD threshold on 20 ms frames
    drop_after_ms: float | None = None    # abort the TCP connection after this much input
    close_after_ms: float | None = None   # send a close frame after this much input ...
    close_code: int = 1011                # ... with this code
    close_reason: str = "Internal error encountered."
    go_away_after_ms: float | None = None  # send goAway after this much input
    go_away_left_s: float = 1.0
    tag: str | None = None


@dataclass
class TurnTruth:
    index: int
    speech_end: float                  # server t the user's speech was judged over
    audio_start: float | None = None   # server t the first audio was sent
    audio_s: float = 0.0               # audio sent (s)
    generated: float | None = None     # server t of generationComplete
    interrupted_at: float | None = None
    status: str = "in_progress"
    sends: list[tuple[float, float]] = field(default_factory=list)  # (t, seconds) per chunk
    stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)


@dataclass
class Session:
    index: int
    path: str
    api_key_header: bool
    script: Script
    setup: dict[str, Any] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    turns: list[TurnTruth] = field(default_factory=list)
    speech: list[tuple[str, float, int]] = field(default_factory=list)  # (event, t, audio ms)
    input_ms: float = 0.0
    mime_types: set[str] = field(default_factory=set)
    usage_sent: dict[str, int] = field(default_factory=dict)
    dropped: bool = False
    t0_monotonic: float | None = None

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "tag": self.script.tag, "t0_monotonic": self.t0_monotonic,
                "input_ms": self.input_ms, "dropped": self.dropped, "speech": self.speech,
                "usage": self.usage_sent,
                # (t, ms) of each input audio message as it arrived: how late the client's
                # input reached the server, the measure of the host's load in a timing test
                "received_audio": [(m["t"], m["audio_ms"]) for m in self.received
                                   if "audio_ms" in m],
                "turns": [{f.name: getattr(r, f.name) for f in fields(r) if f.name != "stop"}
                          for r in self.turns]}


def get(d: dict | None, *names: str, default: Any = None) -> Any:
    """A field by its camelCase or snake_case name (protobuf JSON accepts both)."""
    if not isinstance(d, dict):
        return default
    for name in names:
        for key in (name, _snake(name)):
            if key in d:
                return d[key]
    return default


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def heard_at(sends: list[tuple[float, float]], position: float) -> float | None:
    """When a listener hears ``position`` s into a turn's audio, on the server's clock: each
    chunk plays at 1x from when it was sent, behind what is still playing."""
    end = done = 0.0
    for t, seconds in sends:
        start = max(end, t)
        if done <= position < done + seconds:
            return start + position - done
        end, done = start + seconds, done + seconds
    return None


def b64decode(data: str) -> bytes:
    """Standard or URL-safe base64 (protobuf JSON accepts both; the SDK sends URL-safe)."""
    return base64.b64decode(data.replace("-", "+").replace("_", "/"), validate=True)


class _Connection(SpeakingConnection):
    def __init__(self, ws: ServerConnection, rec: Session):
        super().__init__(ws, rec)
        self.active: TurnTruth | None = None   # the turn still being generated
        self.went_away = False

    async def emit(self, message: dict[str, Any]) -> None:
        content = message.get("serverContent") or {}
        summary: dict[str, Any] = {"t": self.t()}
        for k, v in content.items():
            if k == "modelTurn":
                data = v["parts"][0]["inlineData"]["data"]
                summary["audio_ms"] = len(base64.b64decode(data)) / 2 / OUT_RATE * 1000
            else:
                summary[k] = v
        summary.update({k: v for k, v in message.items() if k != "serverContent"})
        self.rec.sent.append(summary)
        await self.ws.send(json.dumps(message))

    # -- setup --

    def activity_detection(self) -> dict[str, Any]:
        return get(get(self.rec.setup, "realtimeInputConfig", default={}),
                   "automaticActivityDetection", default={}) or {}

    def interrupts(self) -> bool:
        handling = get(get(self.rec.setup, "realtimeInputConfig", default={}),
                       "activityHandling")
        return handling in (None, "ACTIVITY_HANDLING_UNSPECIFIED",
                            "START_OF_ACTIVITY_INTERRUPTS")

    async def run(self) -> None:
        try:
            first = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            setup = first.get("setup")
            if not isinstance(setup, dict) or not str(setup.get("model", "")).startswith(
                    "models/"):
                await self.ws.close(1007, "Request contains an invalid argument.")
                return
            self.rec.setup = setup
            text = " ".join(p.get("text", "") for p in
                            (get(get(setup, "systemInstruction", default={}), "parts") or []))
            if text.startswith("SCRIPT "):
                self.rec.script = Script.from_json(text[len("SCRIPT "):])
            if self.rec.script.close_after_ms == 0:  # e.g. a key the service does not know
                await self.ws.close(self.rec.script.close_code, self.rec.script.close_reason)
                return
            await self.emit({"setupComplete": {}})
            async for raw in self.ws:
                await self.on_message(json.loads(raw))
        except (ConnectionClosed, asyncio.TimeoutError):
            pass
        finally:
            self.cancel_tasks()

    # -- client messages --

    async def on_message(self, msg: dict[str, Any]) -> None:
        rt = get(msg, "realtimeInput")
        if rt is None:
            self.rec.received.append({"t": self.t(), **msg})
            await self.ws.close(1007, "Request contains an invalid argument.")
            return
        audio = get(rt, "audio")
        if audio is not None:
            mime = get(audio, "mimeType", default="")
            self.rec.mime_types.add(mime)
            if mime != f"audio/pcm;rate={IN_RATE}":
                await self.ws.close(1007, f"Unsupported audio mime type {mime!r}.")
                return
            pcm = b64decode(get(audio, "data", default=""))
            self.rec.received.append({"t": self.t(), "audio_ms": len(pcm) / 2 / IN_RATE * 1000})
            self.start_clock()
            await self.on_audio(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768)
            return
        self.rec.received.append({"t": self.t(), **rt})
        if get(rt, "activityStart") is not None:
            await self.user_started(self.frames * 20)
        elif get(rt, "activityEnd") is not None:
            await self.user_stopped(self.frames * 20)

    async def on_audio(self, samples: np.ndarray) -> None:
        self.rec.input_ms += len(samples) / IN_RATE * 1000
        s = self.rec.script
        if self.drop_if_due(s.drop_after_ms):
            return
        if s.close_after_ms is not None and self.rec.input_ms >= s.close_after_ms:
            await self.ws.close(s.close_code, s.close_reason)
            return
        if (s.go_away_after_ms is not None and not self.went_away
                and self.rec.input_ms >= s.go_away_after_ms):
            self.went_away = True
            await self.emit({"goAway": {"timeLeft": f"{s.go_away_left_s:g}s"}})
            task = asyncio.create_task(self.close_later(s.go_away_left_s))
            self.tasks.add(task)
        for level, start_ms in self.vad_levels(samples, FRAME):
            if get(self.activity_detection(), "disabled", default=False):
                continue
            await self.on_frame(level >= s.vad_rms, start_ms)

    async def close_later(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.ws.close(1001, "Session time limit reached.")

    async def on_frame(self, voiced: bool, start_ms: int) -> None:
        if voiced:
            self.silent_frames = 0
            self.last_voiced_end_ms = start_ms + 20
            if not self.speaking:
                await self.user_started(start_ms)
            return
        if not self.speaking:
            return
        self.silent_frames += 1
        silence = get(self.activity_detection(), "silenceDurationMs", default=None) or 500
        if self.silent_frames * 20 >= silence:
            await self.user_stopped(self.last_voiced_end_ms)

    async def user_started(self, at_ms: int) -> None:
        self.speaking = True
        self.rec.speech.append(("started", self.t(), at_ms))
        if self.active is not None and self.interrupts():
            turn, self.active = self.active, None
            turn.interrupted_at = self.t()
            turn.stop.set()
            await self.emit({"serverContent": {"interrupted": True}})

    async def user_stopped(self, end_ms: int) -> None:
        self.speaking = False
        self.rec.speech.append(("stopped", self.t(), end_ms))
        s = self.rec.script
        if self.active is None and (s.max_turns is None or len(self.rec.turns) < s.max_turns):
            turn = TurnTruth(len(self.rec.turns), self.t())
            self.rec.turns.append(turn)
            self.active = turn
            self.spawn(self.speak(turn, (end_ms + s.answer_after_ms) / 1000))

    # -- the model's turn --

    async def speak(self, turn: TurnTruth, start_t: float) -> None:
        s = self.rec.script
        if await pause(turn.stop, start_t - self.t()):
            return await self.bill(turn, "interrupted")
        if not await self.stream_turn(turn, scripted_reply(s), OUT_RATE, s.chunk_ms, s):
            return await self.bill(turn, "interrupted")
        turn.generated = self.t()
        if self.active is turn:
            self.active = None
        await self.emit({"serverContent": {"generationComplete": True}})
        await self.bill(turn, "completed", turn_complete=True)

    async def send_audio(self, turn: TurnTruth, chunk: np.ndarray, seconds: float) -> None:
        await self.emit({"serverContent": {"modelTurn": {"parts": [{"inlineData": {
            "mimeType": f"audio/pcm;rate={OUT_RATE}", "data": b64_pcm16(chunk)}}]}}})
        turn.audio_s += seconds
        turn.sends.append((self.t(), seconds))

    async def send_words(self, turn: TurnTruth, piece: str) -> None:
        await self.emit({"serverContent": {"outputTranscription": {"text": piece}}})

    async def bill(self, turn: TurnTruth, status: str, *, turn_complete: bool = False) -> None:
        """The turn's usage, as the service reports it per turn: the whole input so far is
        the prompt, the audio generated is the response."""
        turn.status = status
        prompt_audio = int(self.rec.input_ms / 1000 * AUDIO_TOKENS_PER_S)
        response_audio = int(round(turn.audio_s * AUDIO_TOKENS_PER_S))
        usage = {"promptTokenCount": prompt_audio + 12, "responseTokenCount": response_audio,
                 "totalTokenCount": prompt_audio + 12 + response_audio,
                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12},
                                         {"modality": "AUDIO", "tokenCount": prompt_audio}],
                 "responseTokensDetails": [{"modality": "AUDIO",
                                            "tokenCount": response_audio}]}
        for k in ("promptTokenCount", "responseTokenCount", "totalTokenCount"):
            self.rec.usage_sent[k] = self.rec.usage_sent.get(k, 0) + usage[k]
        message: dict[str, Any] = {"usageMetadata": usage}
        if turn_complete:
            message["serverContent"] = {"turnComplete": True}
        try:
            await self.emit(message)
        except ConnectionClosed:
            pass


class FakeGeminiServer(FakeServer):
    """``async with FakeGeminiServer(ssl_context) as server:`` -> ``server.base_url``.

    The first ``reject`` handshakes get HTTP 429; ``require_key`` answers a handshake without
    an ``x-goog-api-key`` header with HTTP 401."""

    def __init__(self, ssl_context: ssl.SSLContext, script: Script = Script(), *,
                 script_for: Callable[[int], Script] | None = None, reject: int = 0,
                 require_key: bool = True):
        super().__init__()
        self.ssl_context = ssl_context  # the SDK always connects over wss://
        self.script = script
        self.script_for = script_for
        self.reject = reject
        self.require_key = require_key
        self.rejected = 0
        self.headers_seen: list[dict[str, str]] = []

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        self.headers_seen.append({k.lower(): v for k, v in request.headers.raw_items()})
        path = request.path.split("?")[0]
        if not (path.startswith(PATH_PREFIX) and path.endswith(PATH_SUFFIX)):
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if self.require_key and not request.headers.get("x-goog-api-key"):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "API key required\n")
        if self.rejected < self.reject:
            self.rejected += 1
            return connection.respond(HTTPStatus.TOO_MANY_REQUESTS, "rate limited\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        index = len(self.sessions)
        script = self.script_for(index) if self.script_for else self.script
        rec = Session(index, ws.request.path, bool(ws.request.headers.get("x-goog-api-key")),
                      script)
        self.sessions.append(rec)
        await _Connection(ws, rec).run()


def make_tls(ca_out: str | None = None) -> tuple[ssl.SSLContext, str]:
    """A server SSL context for 127.0.0.1 signed by a fresh test CA; the CA as PEM text
    (written to ``ca_out`` when given), for the client's SSL_CERT_FILE."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    pem = ca.cert_pem.bytes().decode("ascii")
    if ca_out:
        with open(ca_out, "w") as f:
            f.write(pem)
    return ctx, pem


async def _main(argv: list[str]) -> None:
    parser = standalone_parser(__doc__)
    parser.add_argument("--ca-out", required=True, help="write the test CA (PEM) here")
    args = parser.parse_args(argv)
    ctx, _ = make_tls(args.ca_out)
    await serve_until_stdin_closes(FakeGeminiServer(ctx, Script.from_json(args.script)),
                                   args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
