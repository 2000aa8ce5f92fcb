"""A protocol-faithful fake of the OpenAI Realtime (GA) websocket server, on 127.0.0.1.

The real ``openai`` SDK connects to it unchanged (``base_url=http://127.0.0.1:PORT/v1`` ->
``ws://127.0.0.1:PORT/v1/realtime?model=...`` with a Bearer key). It speaks the GA events the
SDK expects: session.created/updated, input_audio_buffer.speech_started/stopped/committed from
a simple energy VAD over the received pcm16 24 kHz input, conversation.item.added/done,
response.created, response.output_item.added, response.content_part.added,
response.output_audio_transcript.delta, response.output_audio.delta (a tone, sent faster than
real time), the matching .done events, response.done, conversation.item.truncated and error.

``dialect`` selects the provider it imitates (``DIALECTS``): ``openai`` (the GA protocol above,
the default), ``xai`` (Grok Voice Agent: GA event names, ``conversation.created`` instead of
``session.created``, periodic ``ping``, ``voice``/``turn_detection`` at the top of the session and
a configurable pcm rate) or ``dashscope`` (Qwen-Omni-Realtime: beta event names
``response.audio.delta`` / ``response.audio_transcript.delta``, ``input_audio_format`` pcm16 at
16 kHz in and ``output_audio_format`` pcm24 at 24 kHz out, token usage in response.done).
Neither of the two has ``conversation.item.truncate``: it gets an ``unknown_event`` error. A
dialect session rejects session fields its provider does not document (``invalid_value``).

Behaviour is scripted (``Script``): answer ``answer_after_ms`` after the user's speech ends,
speak ``speak_s`` seconds, cancel on barge-in, drop the connection mid-instance, refuse
handshakes with HTTP 429. A client may also pick its script per session by sending
``instructions = "SCRIPT {json}"`` in its session.update (lets concurrent trials differ).

Server time: ``t`` = seconds since the first input audio arrived, which is the client's t = 0
give or take the loopback latency. Every session records what it received and sent (audio
payloads summarised by length), and each response's ground truth (when its first audio
delta was sent, how long it is, when a barge-in cut it).

Run standalone (for benchmarks, in its own process)::

    python tests/fakes/realtime_server.py [--script JSON] [--log FILE]
    # prints "PORT <n>", serves until stdin closes, then writes each session's ground truth
"""

from __future__ import annotations

import asyncio
import base64
import copy
import gc
import json
import sys
from dataclasses import dataclass, field, fields
from http import HTTPStatus
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

if str(Path(__file__).resolve().parent) not in sys.path:  # fake_ws.py is beside this file
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_ws import (
    FakeServer,
    JsonScript,
    SpeakingConnection,
    b64_pcm16,
    energy_bounds,  # noqa: F401  (tests and benchmarks use it from here)
    pause,
    scripted_reply,
    serve_until_stdin_closes,
    standalone_parser,
)

RATE = 24_000
FRAME = RATE // 50  # 20 ms VAD frames


@dataclass(frozen=True)
class Dialect:
    """Where a provider's protocol differs from OpenAI's GA one."""

    name: str
    hello: str = "session.created"
    audio_delta: str = "response.output_audio.delta"
    transcript_delta: str = "response.output_audio_transcript.delta"
    audio_done: str = "response.output_audio.done"
    transcript_done: str = "response.output_audio_transcript.done"
    item_added: str = "conversation.item.added"
    item_done: str | None = "conversation.item.done"
    truncate: bool = True
    ping_s: float | None = None      # send {"type": "ping"} this often
    session_fields: frozenset[str] | None = None  # accepted session.update keys (None: any)
    usage: bool = False              # token usage in response.done


DIALECTS = {
    "openai": Dialect("openai"),
    "xai": Dialect("xai", hello="conversation.created", truncate=False, ping_s=0.5,
                   session_fields=frozenset({"instructions", "voice", "turn_detection", "audio",
                                             "tools"})),
    "dashscope": Dialect("dashscope", audio_delta="response.audio.delta",
                         transcript_delta="response.audio_transcript.delta",
                         audio_done="response.audio.done",
                         transcript_done="response.audio_transcript.done",
                         item_added="conversation.item.created", item_done=None, truncate=False,
                         session_fields=frozenset({
                             "modalities", "voice", "instructions", "input_audio_format",
                             "output_audio_format", "turn_detection", "smooth_output", "seed",
                             "max_tokens", "repetition_penalty", "presence_penalty", "top_k",
                             "top_p", "temperature"}),
                         usage=True),
}
DASHSCOPE_FORMATS = {"input": {"pcm16": 16_000, "pcm": 16_000},
                     "output": {"pcm24": 24_000, "pcm": 24_000}}


@dataclass(frozen=True)
class Script(JsonScript):
    answer_after_ms: float = 400.0   # first response audio this long after the speech ended
    speak_s: float = 1.0             # audio length of each response
    text: str = "Sure, here is a short answer for you."
    delta_ms: float = 100.0          # audio per response.output_audio.delta
    pace: float = 4.0                # send speed, multiple of real time (0 = all at once)
    transcript_first: bool = True    # all transcript deltas before any audio (worst case)
    max_responses: int | None = None
    tone_hz: float = 440.0
    speech_file: str | None = None   # speak this recording (e.g. real speech for a VAD) not a tone
    amplitude: float = 0.3
    vad_rms: float = 0.02            # energy VAD threshold on 20 ms frames
    drop_after_ms: float | None = None  # abort the TCP connection after this much input
    tag: str | None = None           # names the session in the log (benchmarks)


@dataclass
class ResponseTruth:
    id: str
    item_id: str
    audio_start: float | None = None   # server t of the first audio delta sent
    audio_s: float = 0.0               # audio sent for it (s)
    planned_s: float = 0.0
    status: str = "in_progress"
    cancelled_at: float | None = None  # server t of the barge-in that cancelled it
    stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)


@dataclass
class Session:
    """Everything one connection did; tests read this."""

    index: int
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    script: Script
    config: dict[str, Any] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    responses: list[ResponseTruth] = field(default_factory=list)
    speech: list[tuple[str, float, int]] = field(default_factory=list)  # (event, t, audio_ms)
    input_ms: float = 0.0
    dropped: bool = False
    t0_monotonic: float | None = None  # time.monotonic() of the first input audio
    header_names: tuple[str, ...] = ()  # handshake header names (lowercase; no values)

    def summary(self) -> dict[str, Any]:
        """The ground truth of this session as plain JSON (no payloads, no headers)."""
        return {"index": self.index, "tag": self.script.tag, "t0_monotonic": self.t0_monotonic,
                "input_ms": self.input_ms, "dropped": self.dropped, "speech": self.speech,
                "responses": [{f.name: getattr(r, f.name) for f in fields(r) if f.name != "stop"}
                              for r in self.responses]}

    def of_type(self, kind: str, *, sent: bool = False) -> list[dict[str, Any]]:
        return [e for e in (self.sent if sent else self.received) if e["type"] == kind]


def default_session(model: str) -> dict[str, Any]:
    return {
        "type": "realtime", "object": "realtime.session", "id": "sess_fake",
        "model": model, "output_modalities": ["audio"],
        "instructions": "You are a helpful, witty, and friendly AI.",
        "tools": [], "tool_choice": "auto", "max_output_tokens": "inf", "tracing": None,
        "prompt": None, "expires_at": 0,
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": RATE}, "transcription": None,
                      "noise_reduction": None,
                      "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                         "prefix_padding_ms": 300,
                                         "silence_duration_ms": 500,
                                         "create_response": True,
                                         "interrupt_response": True,
                                         "idle_timeout_ms": None}},
            "output": {"format": {"type": "audio/pcm", "rate": RATE}, "voice": "alloy",
                       "speed": 1.0},
        },
    }


def dialect_session(dialect: str, model: str) -> dict[str, Any]:
    """A dialect's session.created defaults (the providers' documented ones)."""
    if dialect == "openai":
        return default_session(model)
    if dialect == "xai":
        pcm = {"type": "audio/pcm", "rate": RATE}
        return {"id": "sess_fake", "object": "realtime.session", "model": model,
                "voice": "ara", "instructions": "", "tools": [],
                "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                   "silence_duration_ms": 500, "prefix_padding_ms": 300},
                "audio": {"input": {"format": pcm}, "output": {"format": dict(pcm)}}}
    return {"id": "sess_fake", "object": "realtime.session", "model": model,
            "modalities": ["text", "audio"], "voice": "Cherry",
            "input_audio_format": "pcm16", "output_audio_format": "pcm24",
            "input_audio_transcription": {"model": "gummy-realtime-v1"},
            "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                               "silence_duration_ms": 800, "create_response": True,
                               "interrupt_response": True},
            "tools": [], "tool_choice": "auto", "temperature": 0.8}


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """session.update semantics: present fields replace, nested objects merge."""
    out = copy.deepcopy(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and "type" not in v:
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class _Connection(SpeakingConnection):
    """The protocol state machine for one websocket."""

    def __init__(self, server: "FakeRealtimeServer", ws: ServerConnection, record: Session):
        super().__init__(ws, record)
        self.server = server
        self.dialect = DIALECTS[server.dialect]
        self.n_events = 0
        self.n_items = 0
        self.speech_item: str | None = None
        self.active: tuple[ResponseTruth, asyncio.Task] | None = None
        self.items: dict[str, dict[str, Any]] = {}  # assistant items: id -> {audio_ms, ...}

    def new_id(self, prefix: str) -> str:
        self.n_items += 1
        return f"{prefix}_{self.rec.index}_{self.n_items}"

    async def emit(self, event: dict[str, Any]) -> None:
        self.n_events += 1
        event = {"event_id": f"event_{self.rec.index}_{self.n_events}", **event}
        summary = {k: v for k, v in event.items() if k != "delta"}
        if event["type"] == self.dialect.audio_delta:
            summary["audio_ms"] = len(base64.b64decode(event["delta"])) / 2 / self.out_rate() \
                * 1000
        elif "delta" in event:
            summary["delta"] = event["delta"]
        self.rec.sent.append({"t": self.t(), **summary})
        await self.ws.send(json.dumps(event))

    def turn_detection(self) -> dict[str, Any] | None:
        if self.dialect.name != "openai":
            return self.rec.config.get("turn_detection")
        return self.rec.config["audio"]["input"].get("turn_detection")

    def in_rate(self) -> int:
        if self.dialect.name == "xai":
            return self.rec.config["audio"]["input"]["format"]["rate"]
        if self.dialect.name == "dashscope":
            return DASHSCOPE_FORMATS["input"][self.rec.config["input_audio_format"]]
        return RATE

    def out_rate(self) -> int:
        if self.dialect.name == "xai":
            return self.rec.config["audio"]["output"]["format"]["rate"]
        if self.dialect.name == "dashscope":
            return DASHSCOPE_FORMATS["output"][self.rec.config["output_audio_format"]]
        return RATE

    def invalid_update(self, update: dict[str, Any]) -> str | None:
        """Why a dialect's provider would refuse this session.update (None: it is fine)."""
        allowed = self.dialect.session_fields
        if allowed is None:
            return None
        bad = sorted(set(update) - allowed)
        if bad:
            return f"unknown session field(s) for {self.dialect.name}: {', '.join(bad)}"
        if self.dialect.name == "xai":
            for side in ("input", "output"):
                fmt = ((update.get("audio") or {}).get(side) or {}).get("format")
                if fmt is not None and (fmt.get("type") != "audio/pcm"
                                        or not 8000 <= fmt.get("rate", 0) <= 48000):
                    return f"audio.{side}.format must be audio/pcm at 8000-48000 Hz"
        if self.dialect.name == "dashscope":
            for side in ("input", "output"):
                fmt = update.get(f"{side}_audio_format")
                if fmt is not None and fmt not in DASHSCOPE_FORMATS[side]:
                    return f"{side}_audio_format {fmt!r} is not supported"
        return None

    async def pings(self) -> None:
        while True:
            await asyncio.sleep(self.dialect.ping_s)
            await self.emit({"type": "ping"})

    # -- client events --

    async def run(self) -> None:
        if self.dialect.hello == "session.created":
            await self.emit({"type": "session.created", "session": self.rec.config})
        else:
            await self.emit({"type": self.dialect.hello,
                             "conversation": {"id": f"conv_{self.rec.index}",
                                              "object": "realtime.conversation"}})
        if self.dialect.ping_s:
            self.spawn(self.pings())
        try:
            async for message in self.ws:
                event = json.loads(message)
                await self.on_event(event)
        except ConnectionClosed:
            pass
        finally:
            self.cancel_tasks()

    async def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        entry = {"t": self.t(), **event}
        if kind == "input_audio_buffer.append":
            pcm = base64.b64decode(event.get("audio", ""))
            entry = {"t": self.t(), "type": kind,
                     "audio_ms": len(pcm) / 2 / self.in_rate() * 1000}
        self.rec.received.append(entry)
        if kind == "session.update":
            update = event.get("session") or {}
            instructions = update.get("instructions") or ""
            if instructions.startswith("SCRIPT "):
                self.rec.script = Script.from_json(instructions[len("SCRIPT "):])
            why = self.invalid_update(update)
            if self.server.echo_headers:  # a misconfigured proxy that quotes the request
                why = "bad request; headers were: " + "; ".join(
                    f"{k}: {v}" for k, v in self.ws.request.headers.raw_items())
            if why is not None:
                return await self.error("invalid_request_error", "invalid_value", why, event)
            self.rec.config = merge(self.rec.config, update)
            await self.emit({"type": "session.updated", "session": self.rec.config})
        elif kind == "input_audio_buffer.append":
            self.start_clock()
            await self.on_audio(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768)
        elif kind == "conversation.item.truncate" and self.dialect.truncate:
            await self.on_truncate(event)
        elif kind == "response.cancel":
            if self.active is None:
                await self.error("invalid_request_error", "response_cancel_not_active",
                                 "Cancellation failed: no active response found", event)
            else:
                await self.cancel()
        else:
            await self.error("invalid_request_error", "unknown_event",
                             f"The server does not support event type {kind!r} here", event)

    async def error(self, kind: str, code: str, message: str, event: dict[str, Any]) -> None:
        await self.emit({"type": "error", "error": {"type": kind, "code": code,
                                                     "message": message, "param": None,
                                                     "event_id": event.get("event_id")}})

    async def on_audio(self, samples: np.ndarray) -> None:
        self.rec.input_ms += len(samples) / self.in_rate() * 1000
        script = self.rec.script
        if self.drop_if_due(script.drop_after_ms):
            return
        frame_n = FRAME if self.dialect.name == "openai" else self.in_rate() // 50
        for level, start_ms in self.vad_levels(samples, frame_n):
            await self.on_frame(level >= script.vad_rms, start_ms)

    async def on_frame(self, voiced: bool, start_ms: int) -> None:
        td = self.turn_detection()
        if td is None:
            return
        if voiced:
            self.silent_frames = 0
            self.last_voiced_end_ms = start_ms + 20
            if not self.speaking:
                self.speaking = True
                self.speech_item = self.new_id("item")
                self.rec.speech.append(("started", self.t(), start_ms))
                await self.emit({"type": "input_audio_buffer.speech_started",
                                 "audio_start_ms": start_ms, "item_id": self.speech_item})
                if td.get("interrupt_response", True) and self.active is not None:
                    await self.cancel()
            return
        if not self.speaking:
            return
        self.silent_frames += 1
        if self.silent_frames * 20 < td.get("silence_duration_ms", 500):
            return
        self.speaking = False
        end_ms = self.last_voiced_end_ms
        self.rec.speech.append(("stopped", self.t(), end_ms))
        item = self.speech_item
        await self.emit({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": end_ms,
                         "item_id": item})
        await self.emit({"type": "input_audio_buffer.committed", "item_id": item,
                         "previous_item_id": None})
        user_item = {"id": item, "object": "realtime.item", "type": "message",
                     "status": "completed", "role": "user",
                     "content": [{"type": "input_audio", "transcript": None}]}
        await self.emit({"type": self.dialect.item_added, "previous_item_id": None,
                         "item": user_item})
        if self.dialect.item_done:
            await self.emit({"type": self.dialect.item_done, "previous_item_id": None,
                             "item": user_item})
        script = self.rec.script
        if td.get("create_response", True) and self.active is None and (
                script.max_responses is None or len(self.rec.responses) < script.max_responses):
            await self.respond(end_ms)

    # -- responses --

    async def respond(self, speech_end_ms: int) -> None:
        script = self.rec.script
        truth = ResponseTruth(self.new_id("resp"), self.new_id("item"), planned_s=script.speak_s)
        self.rec.responses.append(truth)
        await self.emit({"type": "response.created", "response": self.response_obj(truth, [])})
        start_t = (speech_end_ms + script.answer_after_ms) / 1000
        self.active = (truth, self.spawn(self.speak(truth, start_t)))

    def response_obj(self, truth: ResponseTruth, output: list[dict[str, Any]]) -> dict[str, Any]:
        if self.dialect.name != "openai":
            return {"object": "realtime.response", "id": truth.id, "status": truth.status,
                    "status_details": None if truth.status != "cancelled" else
                    {"type": "cancelled", "reason": "turn_detected"},
                    "output": output, "usage": self.usage(truth)}
        return {"object": "realtime.response", "id": truth.id, "status": truth.status,
                "status_details": None if truth.status != "cancelled" else
                {"type": "cancelled", "reason": "turn_detected"},
                "output": output, "conversation_id": "conv_fake", "output_modalities": ["audio"],
                "max_output_tokens": "inf", "audio": {"output": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "voice": self.rec.config["audio"]["output"].get("voice")}},
                "usage": None, "metadata": None}

    def usage(self, truth: ResponseTruth) -> dict[str, Any] | None:
        """DashScope-style token counts (deterministic, so a test can sum them); the
        response's share of input is all input so far."""
        if not self.dialect.usage or truth.status == "in_progress":
            return None
        audio_in = int(round(self.rec.input_ms / 40))  # 25 tokens per second of input
        audio_out = int(round(truth.audio_s * 25))
        text_out = len(self.rec.script.text.split()) if truth.status == "completed" else 0
        return {"total_tokens": audio_in + audio_out + text_out, "input_tokens": audio_in,
                "output_tokens": audio_out + text_out,
                "input_tokens_details": {"text_tokens": 0, "audio_tokens": audio_in},
                "output_tokens_details": {"text_tokens": text_out, "audio_tokens": audio_out}}

    def assistant_item(self, truth: ResponseTruth, status: str, transcript: str) -> dict:
        return {"id": truth.item_id, "object": "realtime.item", "type": "message",
                "status": status, "role": "assistant",
                "content": [{"type": "output_audio", "transcript": transcript}]}

    @staticmethod
    def content_ids(truth: ResponseTruth) -> dict[str, Any]:
        return {"response_id": truth.id, "item_id": truth.item_id, "output_index": 0}

    async def speak(self, truth: ResponseTruth, start_t: float) -> None:
        script = self.rec.script
        if await pause(truth.stop, start_t - self.t()):
            return await self.finish(truth, "cancelled")
        ids = self.content_ids(truth)
        self.items[truth.item_id] = {"audio_ms": 0.0, "truncated": None}
        await self.emit({"type": "response.output_item.added", "response_id": truth.id,
                         "output_index": 0,
                         "item": self.assistant_item(truth, "in_progress", "")})
        await self.emit({"type": self.dialect.item_added, "previous_item_id": None,
                         "item": self.assistant_item(truth, "in_progress", "")})
        await self.emit({"type": "response.content_part.added", **ids, "content_index": 0,
                         "part": {"type": "audio", "transcript": ""}})
        rate = self.out_rate()
        sent_all = await self.stream_turn(truth, scripted_reply(script, rate), rate,
                                          script.delta_ms, script)
        await self.finish(truth, "completed" if sent_all else "cancelled")

    async def send_audio(self, truth: ResponseTruth, chunk: np.ndarray, seconds: float) -> None:
        await self.emit({"type": self.dialect.audio_delta, **self.content_ids(truth),
                         "content_index": 0, "delta": b64_pcm16(chunk)})
        truth.audio_s += seconds
        self.items[truth.item_id]["audio_ms"] = truth.audio_s * 1000  # what a truncate may cut

    async def send_words(self, truth: ResponseTruth, piece: str) -> None:
        await self.emit({"type": self.dialect.transcript_delta, **self.content_ids(truth),
                         "content_index": 0, "delta": piece})

    async def finish(self, truth: ResponseTruth, status: str) -> None:
        truth.status = status
        ids = self.content_ids(truth)
        item_status = "completed" if status == "completed" else "incomplete"
        text = self.rec.script.text if status == "completed" else ""
        if truth.item_id in self.items:
            await self.emit({"type": self.dialect.audio_done, **ids, "content_index": 0})
            await self.emit({"type": self.dialect.transcript_done, **ids,
                             "content_index": 0, "transcript": text})
            await self.emit({"type": "response.content_part.done", **ids, "content_index": 0,
                             "part": {"type": "audio", "transcript": text}})
            item = self.assistant_item(truth, item_status, text)
            await self.emit({"type": "response.output_item.done", "response_id": truth.id,
                             "output_index": 0, "item": item})
            if self.dialect.item_done:
                await self.emit({"type": self.dialect.item_done, "previous_item_id": None,
                                 "item": item})
            output = [item]
        else:
            output = []
        await self.emit({"type": "response.done",
                         "response": self.response_obj(truth, output)})
        if self.active is not None and self.active[0] is truth:
            self.active = None
        return None

    async def cancel(self) -> None:
        """Barge-in: the speaking task stops at its next await and reports the cancel (a
        delta already on its way still arrives, as with the real service)."""
        truth, _ = self.active
        truth.cancelled_at = self.t()
        truth.stop.set()
        self.active = None

    async def on_truncate(self, event: dict[str, Any]) -> None:
        item = self.items.get(event.get("item_id"))
        end_ms = event.get("audio_end_ms")
        if item is None:
            await self.error("invalid_request_error", "item_not_found",
                             f"Item {event.get('item_id')!r} not found", event)
        elif not isinstance(end_ms, int) or end_ms < 0 or end_ms > item["audio_ms"] + 1e-6:
            await self.error("invalid_request_error", "invalid_value",
                             f"audio_end_ms {end_ms} is beyond the item's "
                             f"{item['audio_ms']:.0f} ms of audio", event)
        elif event.get("content_index") != 0:
            await self.error("invalid_request_error", "invalid_value",
                             "content_index must be 0 for an audio message", event)
        else:
            item["truncated"] = end_ms
            await self.emit({"type": "conversation.item.truncated",
                             "item_id": event["item_id"], "content_index": 0,
                             "audio_end_ms": end_ms})


class FakeRealtimeServer(FakeServer):
    """``async with FakeRealtimeServer(script) as server:`` -> ``server.base_url``.

    ``script`` is the default for every session (``script_for(index)`` overrides it per
    connection); the first ``reject`` handshakes get HTTP 429. ``dialect`` picks the provider
    imitated (``DIALECTS``)."""

    def __init__(self, script: Script = Script(), *,
                 script_for: Callable[[int], Script] | None = None, reject: int = 0,
                 require_key: bool = True, deny_keys: bool = False, dialect: str = "openai",
                 echo_headers: bool = False):
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
        super().__init__()
        self.dialect = dialect
        self.script = script
        self.script_for = script_for
        self.reject = reject
        self.require_key = require_key
        self.deny_keys = deny_keys  # answer every handshake 401, as for a revoked key
        self.echo_headers = echo_headers  # refuse session.update quoting the request headers
        self.rejected = 0

    @property
    def base_url(self) -> str:
        prefix = "/api-ws" if self.dialect == "dashscope" else ""
        return f"http://127.0.0.1:{self.port}{prefix}/v1"

    def _process_request(self, connection: ServerConnection, request):
        self.handshakes += 1
        url = urlsplit(request.path)
        if not url.path.endswith("/realtime"):
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if "model" not in parse_qs(url.query):
            return connection.respond(HTTPStatus.BAD_REQUEST, "missing model\n")
        auth = request.headers.get("Authorization")
        if self.deny_keys or (
                self.require_key and not (auth and auth.startswith("Bearer ") and len(auth) > 7)):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid bearer key\n")
        if self.rejected < self.reject:
            self.rejected += 1
            return connection.respond(HTTPStatus.TOO_MANY_REQUESTS, "rate limited\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        url = urlsplit(ws.request.path)
        query = parse_qs(url.query)
        index = len(self.sessions)
        script = self.script_for(index) if self.script_for else self.script
        rec = Session(index, url.path, query, ws.request.headers.get("Authorization"), script,
                      config=dialect_session(self.dialect, query["model"][0]))
        rec.header_names = tuple(sorted({k.lower() for k in ws.request.headers.keys()}))
        self.sessions.append(rec)
        await _Connection(self, ws, rec).run()


async def _main(argv: list[str]) -> None:
    parser = standalone_parser(__doc__)
    parser.add_argument("--dialect", default="openai", choices=sorted(DIALECTS))
    parser.add_argument("--gc-off", action="store_true",
                        help="no garbage collection (a benchmark's server: its record of "
                             "every message grows with the run, and a full collection's "
                             "pause would be counted against the client's timing)")
    args = parser.parse_args(argv)
    if args.gc_off:
        gc.disable()
    await serve_until_stdin_closes(
        FakeRealtimeServer(Script.from_json(args.script), dialect=args.dialect), args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
