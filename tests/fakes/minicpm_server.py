"""A protocol-faithful fake of the MiniCPM-o demo's duplex WebSocket server, on 127.0.0.1.

It speaks what the demo's gateway and worker speak (OpenBMB/MiniCPM-o-Demo: docs/en/api/
duplex.md, gateway.py ``/ws/duplex/{session_id}``, worker.py ``/ws/duplex``): ``queued`` /
``queue_update`` / ``queue_done``; ``prepare`` (system prompt + DuplexConfig) -> ``prepared``;
per step one ``audio_chunk`` (``audio_base64``: float32 mono 16 kHz) -> one ``result``
(``is_listen``, ``text``, ``audio_data`` as float32 24 kHz, ``end_of_turn``, the timing and
token fields); ``stop`` -> ``stopped``; errors as ``{"type": "error", "error": ...}``.

Instead of a model it follows a ``Script`` (the server's, or per session a system prompt
``"SCRIPT {json}"``): it listens while an energy VAD hears the user in
a step, answers ``answer_after_steps`` silent steps after the user stops, speaking
``audio_per_step_s`` of a tone (or of a speech file) per step for ``speak_steps`` steps, the last with
``end_of_turn``. If the user speaks during a turn, the next result is a listen (the model
stops: the protocol's barge-in). The first ``force_listen_count`` steps always listen, as in
the demo. Each result goes out ``compute_ms`` after its chunk arrived (inference time).

Ground truth per session: every result's send time on ``time.monotonic()`` (the test's event
loop clock), and for each turn the send time of its first audio and of the listen that cut it.

Run standalone (its own process, for the plugin tests)::

    python tests/fakes/minicpm_server.py [--script JSON] [--log FILE]
    # prints "PORT <n>", serves until stdin closes
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
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
    serve_until_stdin_closes,
    speech,
    standalone_parser,
    tone,
)

IN_RATE = 16_000
DUPLEX_CONFIG = {  # the demo's DuplexConfig fields and defaults
    "generate_audio": True, "ls_mode": "explicit", "force_listen_count": 3,
    "max_new_speak_tokens_per_chunk": 20, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
    "listen_prob_scale": 1.0, "chunk_ms": 1000, "sample_rate": 16000,
}


@dataclass(frozen=True)
class Script(JsonScript):
    answer_after_steps: int = 0      # silent steps after the user's speech before answering
    speak_steps: int = 3             # steps per answer
    audio_per_step_s: float = 1.0    # audio in each speak result (a model may run ahead)
    compute_ms: float = 150.0        # inference time before each result
    text: str = "Sure, here is a short answer for you."
    tone_hz: float = 440.0
    amplitude: float = 0.3
    speech_file: str | None = None   # speak this recording instead of a tone
    vad_rms: float = 0.02            # a step is "voiced" if any 20 ms frame reaches this RMS
    max_turns: int | None = None
    queue_s: float = 0.0             # time spent "queued" before queue_done
    drop_after_steps: int | None = None  # abort the TCP connection at this step
    tag: str | None = None


@dataclass
class Turn:
    index: int
    first_audio_at: float | None = None  # time.monotonic() the first speak result was sent
    steps: int = 0
    audio_s: float = 0.0
    ended: str = "speaking"              # end_of_turn | interrupted
    cut_at: float | None = None          # time.monotonic() the interrupting listen was sent


@dataclass
class Session:
    index: int
    session_id: str
    authorization: str | None
    script: Script
    prepare: dict[str, Any] | None = None
    received: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # {sent_at, is_listen, ...}
    turns: list[Turn] = field(default_factory=list)
    t0_monotonic: float | None = None   # the first audio_chunk's arrival
    stopped: bool = False
    dropped: bool = False

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "tag": self.script.tag, "t0_monotonic": self.t0_monotonic,
                "steps": len(self.results), "stopped": self.stopped, "dropped": self.dropped,
                "turns": [t.__dict__ for t in self.turns]}


def b64_float32(x: np.ndarray) -> str:
    return base64.b64encode(np.asarray(x, dtype="<f4").tobytes()).decode("ascii")


class _Connection:
    def __init__(self, ws: ServerConnection, rec: Session):
        self.ws = ws
        self.rec = rec
        self.step_n = IN_RATE  # samples per step (config.chunk_ms)
        self.force_listen = DUPLEX_CONFIG["force_listen_count"]
        self.steps = 0
        self.heard_speech = False
        self.silent_steps = 0
        self.turn: Turn | None = None
        self.words: list[str] = rec.script.text.split()
        self.voice = speech(rec.script.speech_file) if rec.script.speech_file else None

    async def send(self, msg: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(msg))

    async def error(self, text: str) -> None:
        await self.send({"type": "error", "error": text})

    async def run(self) -> None:
        script = self.rec.script
        if script.queue_s > 0:  # every worker busy: wait in the queue first
            await self.send({"type": "queued", "position": 1, "estimated_wait_s": script.queue_s,
                             "ticket_id": f"t{self.rec.index}", "queue_length": 1})
            await asyncio.sleep(script.queue_s / 2)
            await self.send({"type": "queue_update", "position": 1,
                             "estimated_wait_s": script.queue_s / 2, "queue_length": 1})
            await asyncio.sleep(script.queue_s / 2)
        await self.send({"type": "queue_done"})
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                if not await self.on_message(msg):
                    break
        except ConnectionClosed:
            pass

    async def on_message(self, msg: dict[str, Any]) -> bool:
        kind = msg.get("type")
        summary = {k: v for k, v in msg.items() if k != "audio_base64"}
        if kind == "audio_chunk":
            summary["samples"] = len(base64.b64decode(msg.get("audio_base64") or "")) // 4
        self.rec.received.append({"t": time.monotonic(), **summary})
        if kind == "prepare":
            await self.on_prepare(msg)
        elif kind == "audio_chunk":
            await self.on_chunk(msg)
        elif kind == "stop":
            self.rec.stopped = True
            await self.send({"type": "stopped"})
            return False
        elif kind in ("pause", "resume"):
            await self.send({"type": "paused" if kind == "pause" else "resumed"})
        else:
            await self.error(f"Unknown message type: {kind}")
        return True

    async def on_prepare(self, msg: dict[str, Any]) -> None:
        config = msg.get("config") or {}
        bad = sorted(set(config) - set(DUPLEX_CONFIG))
        if bad:
            return await self.error(f"DuplexConfig has no field(s) {', '.join(bad)}")
        if config.get("sample_rate", IN_RATE) != IN_RATE:
            return await self.error("sample_rate must be 16000")
        prompt = msg.get("system_prompt", "You are a helpful assistant.")
        if prompt.startswith("SCRIPT "):  # per-session behaviour (concurrent trials differ)
            self.rec.script = Script.from_json(prompt[len("SCRIPT "):])
            self.words = self.rec.script.text.split()
            self.voice = (speech(self.rec.script.speech_file) if self.rec.script.speech_file
                          else None)
        self.rec.prepare = msg
        self.step_n = int(IN_RATE * config.get("chunk_ms", 1000) / 1000)
        self.force_listen = config.get("force_listen_count", DUPLEX_CONFIG["force_listen_count"])
        await self.send({"type": "prepared", "prompt_length": len(prompt.split()) + 8})

    def voiced(self, x: np.ndarray) -> bool:
        n = len(x) // 320
        if n == 0:
            return False
        rms = np.sqrt((x[: n * 320].astype(np.float64).reshape(n, 320) ** 2).mean(axis=1))
        return bool((rms >= self.rec.script.vad_rms).any())

    async def on_chunk(self, msg: dict[str, Any]) -> None:
        arrived = time.monotonic()
        if self.rec.prepare is None:
            return await self.error("Session not prepared")
        data = msg.get("audio_base64")
        if not data:
            return await self.error("Missing audio_base64")
        x = np.frombuffer(base64.b64decode(data), dtype="<f4")
        if len(x) != self.step_n:
            return await self.error(f"audio chunk has {len(x)} samples, expected "
                                    f"{self.step_n} (config.chunk_ms)")
        if self.rec.t0_monotonic is None:
            self.rec.t0_monotonic = arrived
        self.steps += 1
        script = self.rec.script
        if script.drop_after_steps is not None and self.steps >= script.drop_after_steps:
            self.rec.dropped = True
            self.ws.transport.abort()
            return
        speak = self.decide(self.voiced(x))
        # inference time, counted from the chunk's arrival
        await asyncio.sleep(max(0.0, arrived + script.compute_ms / 1000 - time.monotonic()))
        await self.result(speak, arrived)

    def decide(self, voiced: bool) -> bool:
        """The scripted listen/speak decision for this step."""
        script = self.rec.script
        if self.steps <= self.force_listen:
            self.heard_speech |= voiced
            return False
        if self.turn is not None:
            if voiced:  # the user talks over the model: it stops (barge-in)
                self.turn.ended = "interrupted"
                self.heard_speech, self.silent_steps = True, 0
                return False
            return True
        if voiced:
            self.heard_speech, self.silent_steps = True, 0
            return False
        if not self.heard_speech:
            return False
        self.silent_steps += 1
        if self.silent_steps <= script.answer_after_steps:
            return False
        if script.max_turns is not None and len(self.rec.turns) >= script.max_turns:
            return False
        self.turn = Turn(len(self.rec.turns))
        self.rec.turns.append(self.turn)
        self.heard_speech, self.silent_steps = False, 0
        return True

    async def result(self, speak: bool, arrived: float) -> None:
        script = self.rec.script
        out: dict[str, Any] = {"type": "result", "is_listen": not speak, "text": "",
                               "audio_data": "", "end_of_turn": False,
                               "current_time": self.steps * self.step_n * 1000 // IN_RATE,
                               "n_tokens": 1, "n_tts_tokens": 0, "cost_tts_ms": 0.0}
        turn = self.turn
        if speak:
            n = int(round(OUT_RATE * script.audio_per_step_s))
            offset = turn.steps * n
            if self.voice is not None:
                audio = np.zeros(n, np.float32)
                piece = self.voice[offset: offset + n]
                audio[: len(piece)] = piece
            else:
                audio = tone(n, script.tone_hz, script.amplitude, offset)
            k = len(self.words)
            a, b = (k * turn.steps) // script.speak_steps, (k * (turn.steps + 1)) // script.speak_steps
            text = " ".join(self.words[a:b])
            turn.steps += 1
            last = turn.steps >= script.speak_steps
            out.update(text=(text + " ") if text and not last else text,
                       audio_data=b64_float32(audio), end_of_turn=last,
                       n_tokens=max(1, b - a), n_tts_tokens=n // 480, cost_tts_ms=30.0)
        cost = (time.monotonic() - arrived) * 1000
        out.update(cost_llm_ms=round(cost * 0.6, 1), cost_all_ms=round(cost, 1))
        sent_at = time.monotonic()
        out["server_send_ts"] = time.time()
        await self.send(out)
        self.rec.results.append({"sent_at": sent_at, "is_listen": not speak,
                                 "end_of_turn": out["end_of_turn"]})
        if speak:
            if turn.first_audio_at is None:
                turn.first_audio_at = sent_at
            turn.audio_s += script.audio_per_step_s
            if out["end_of_turn"]:
                turn.ended = "end_of_turn"
                self.turn = None
        elif turn is not None and turn.ended == "interrupted":
            turn.cut_at = sent_at
            self.turn = None


class FakeMiniCPMServer(FakeServer):
    """``async with FakeMiniCPMServer(script) as server:`` -> ``server.url`` (ws://...)."""

    def __init__(self, script: Script = Script(), *, require_key: bool = False):
        super().__init__()
        self.script = script
        self.require_key = require_key

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        parts = request.path.split("?")[0].strip("/").split("/")
        if len(parts) != 3 or parts[:2] != ["ws", "duplex"]:
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if not parts[2].startswith("adx_"):  # omni_* needs video frames, not served here
            return connection.respond(HTTPStatus.NOT_FOUND, "audio duplex is adx_*\n")
        auth = request.headers.get("Authorization")
        if self.require_key and not (auth and auth.startswith("Bearer ") and len(auth) > 7):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "unauthorized\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        sid = ws.request.path.split("?")[0].rstrip("/").split("/")[-1]
        rec = Session(len(self.sessions), sid, ws.request.headers.get("Authorization"),
                      self.script)
        self.sessions.append(rec)
        await _Connection(ws, rec).run()


async def _main(argv: list[str]) -> None:
    args = standalone_parser(__doc__).parse_args(argv)
    await serve_until_stdin_closes(FakeMiniCPMServer(Script.from_json(args.script)), args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
