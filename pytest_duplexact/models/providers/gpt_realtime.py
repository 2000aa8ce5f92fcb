"""``--duplexact-model=gpt-realtime``: the OpenAI Realtime API as a ``StreamingModel``.

Speaks the GA realtime protocol through the ``openai`` SDK's websocket client
(``AsyncOpenAI().realtime.connect(model=...)``): pcm16 at 24 kHz both ways, provider-side turn
detection (server_vad or semantic_vad) decides when the model answers, and a barge-in is
``input_audio_buffer.speech_started`` followed by our ``conversation.item.truncate`` with the
audio actually played. Timing, playback and the transcript alignment live in
``pipelines/streaming_duplex.py``; this module only translates the protocol (docs/realtime.md).

The OpenAI-style dialects (models/providers/realtime_dialects.py) share the handshake and its errors
(``open_connection``, ``connect_failure``), the session-setup error mapping (``setup_error``,
``is_transient``) and the session itself.

The API key is read from ``OPENAI_API_KEY`` only (by the SDK client); this module never
holds, logs or repeats it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import weakref
from dataclasses import dataclass
from typing import Any, AsyncIterator

import numpy as np
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosed  # openai[realtime] brings websockets

from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import (  # also read as openai_realtime.ModelConfigError
    ModelConfigError,
    coerce,
    connect_error,
    scrub,
    server_message,
    tls_context,
)
from ..streaming_contract import (
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Error,
    Event,
    ItemDone,
    ResponseDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from ..util.pcm import b64_pcm, from_b64_pcm16
from ..util.ws_session import close_code, ready_now, receive, send_now, write_now

log = logging.getLogger(__name__)

PCM_RATE = 24_000  # the only PCM rate the Realtime API accepts (audio/pcm)
TURN_DETECTION = ("server_vad", "semantic_vad", "none")
CLOSE_TIMEOUT_S = 5.0
KEY_ENV = "OPENAI_API_KEY"
_APPEND_HEAD = '{"type": "input_audio_buffer.append", "audio": "'


@dataclass(frozen=True)
class OpenAIRealtime(DuplexModel):
    """Options (all settable as ``--duplexact-model-option``-style strings).

    Turn detection defaults to the provider's server VAD with its documented defaults
    (threshold 0.5, 300 ms prefix padding, 500 ms silence), which auto-creates a response at
    the end of the user's turn and cancels it when the user barges in; ``semantic_vad`` uses
    ``eagerness`` instead of the silence window."""

    model: str = "gpt-realtime"
    voice: str = "marin"
    instructions: str | None = None  # None: the provider's default system instructions
    turn_detection: str = "server_vad"
    vad_threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    eagerness: str = "auto"
    interrupt_response: bool = True
    noise_reduction: str | None = None  # "near_field" / "far_field"; None = off
    base_url: str | None = None  # None: OPENAI_BASE_URL, else the SDK's default
    connect_timeout: float = 20.0
    chunk_ms: float = DEFAULT_CHUNK_MS

    input_sample_rate = PCM_RATE
    output_sample_rate = PCM_RATE

    def __post_init__(self):
        if not os.environ.get("OPENAI_API_KEY"):
            raise ModelConfigError(
                f"{self.model}: no OpenAI API key. Set the OPENAI_API_KEY environment "
                "variable (the key is read from the environment only, never from options "
                "or files).")
        if self.turn_detection not in TURN_DETECTION:
            raise ModelConfigError(f"{self.model}: turn_detection must be one of "
                                   f"{', '.join(TURN_DETECTION)}, got {self.turn_detection!r}")
        if self.eagerness not in ("low", "medium", "high", "auto"):
            raise ModelConfigError(f"{self.model}: eagerness must be low, medium, high or "
                                   f"auto, got {self.eagerness!r}")
        if self.noise_reduction not in (None, "near_field", "far_field"):
            raise ModelConfigError(f"{self.model}: noise_reduction must be near_field, "
                                   f"far_field or none, got {self.noise_reduction!r}")
        if not 0.0 <= self.vad_threshold <= 1.0:
            raise ModelConfigError(f"{self.model}: vad_threshold must be in [0, 1], "
                                   f"got {self.vad_threshold}")
        if self.chunk_ms <= 0 or self.connect_timeout <= 0:
            raise ModelConfigError(f"{self.model}: chunk_ms and connect_timeout must be "
                                   "positive")
        from ...remote.netsafety import insecure_url_problem

        problem = insecure_url_problem(self.base_url or os.environ.get("OPENAI_BASE_URL"),
                                       f"{self.model}: base_url")
        if problem:
            raise ModelConfigError(problem)

    @property
    def name(self) -> str:
        return self.model

    def turn_detection_config(self) -> dict[str, Any] | None:
        if self.turn_detection == "none":
            return None
        if self.turn_detection == "semantic_vad":
            return {"type": "semantic_vad", "eagerness": self.eagerness,
                    "create_response": True, "interrupt_response": self.interrupt_response}
        return {"type": "server_vad", "threshold": self.vad_threshold,
                "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms,
                "create_response": True, "interrupt_response": self.interrupt_response}

    def session_config(self) -> dict[str, Any]:
        """The ``session.update`` payload (GA shape)."""
        pcm = {"type": "audio/pcm", "rate": PCM_RATE}
        audio_in: dict[str, Any] = {"format": pcm,
                                    "turn_detection": self.turn_detection_config()}
        audio_in["noise_reduction"] = ({"type": self.noise_reduction}
                                       if self.noise_reduction else None)
        config: dict[str, Any] = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": audio_in, "output": {"format": pcm, "voice": self.voice}},
        }
        if self.instructions is not None:
            config["instructions"] = self.instructions
        return config

    async def connect(self, info: SessionInfo) -> "OpenAIRealtimeSession":
        client = _client(self.base_url)
        url = client.websocket_base_url or client.base_url
        conn = await open_connection(client, str(url), self.model, self.connect_timeout)
        session = OpenAIRealtimeSession(conn, self.interrupt_response)
        return await configured(session, self.session_config(), self.connect_timeout,
                                self.model)


# Building an SDK client loads the CA bundle (~40 ms of CPU on the event loop that also paces
# every other session's input), so one is made per event loop and endpoint and shared (the TLS
# context likewise, once per process: model_options.tls_context).
_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = \
    weakref.WeakKeyDictionary()


async def open_connection(client: AsyncOpenAI, url: str, model: str, timeout: float,
                          key_env: str = KEY_ENV) -> Any:
    """The SDK's realtime websocket for ``model`` at ``url`` (TLS for https/wss), entered
    within ``timeout``; a failed handshake raises ``connect_failure``'s error."""
    options = {"ssl": tls_context()} if url.startswith(("https", "wss")) else {}
    manager = client.realtime.connect(model=model, websocket_connection_options=options)
    try:
        return await asyncio.wait_for(manager.enter(), timeout)
    except Exception as e:
        raise connect_failure(e, model, key_env) from None


async def configured(session, config: dict[str, Any], timeout: float, model: str):
    """``session`` once the server confirmed ``config`` within ``timeout`` (a transient
    failure otherwise); a session that fails here is closed, never leaked."""
    try:
        await asyncio.wait_for(session.configure(config), timeout)
    except asyncio.TimeoutError:
        await session.close()
        raise TransientModelError(f"{model}: no session.updated within {timeout:.0f}s") \
            from None
    except BaseException:
        await session.close()
        raise
    return session


def _client(base_url: str | None) -> AsyncOpenAI:
    """The SDK client for this loop; it reads OPENAI_API_KEY (and OPENAI_BASE_URL) itself.
    Keyed by a hash of the key, so a changed environment gets a fresh client."""
    per_loop = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, os.environ.get("OPENAI_BASE_URL"), hash(os.environ.get("OPENAI_API_KEY")))
    if key not in per_loop:
        per_loop[key] = AsyncOpenAI(base_url=base_url or None, max_retries=0)
    return per_loop[key]


def connect_failure(e: BaseException, model: str, key_env: str = KEY_ENV) -> ModelError:
    """A failed realtime handshake as the error that says what to do (a rejected key names
    ``key_env``; busy or unreachable is transient)."""
    return connect_error(e, model, (key_env,),
                         not_found="the realtime endpoint: unknown model or wrong base URL")


def _dropped(e: ConnectionClosed) -> TransientModelError:
    return TransientModelError(f"the realtime connection closed mid-instance "
                               f"(close code {close_code(e)})")


def add_usage(total: dict[str, float], usage: Any, prefix: str = "") -> None:
    """Sum the numbers of a provider's ``response.usage`` (nested details flattened with
    dots: ``input_token_details.audio_tokens``)."""
    if not isinstance(usage, dict):
        return
    for key, value in usage.items():
        name = prefix + key
        if isinstance(value, dict):
            add_usage(total, value, name + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[name] = total.get(name, 0) + value


def is_transient(kind: str, code: str) -> bool:
    """Whether a server ``error`` event (its ``type`` and ``code``) is worth a fresh
    session: rate limits, server errors, an expired session."""
    return "rate_limit" in kind or "rate_limit" in code or kind == "server_error" \
        or code == "session_expired"


def setup_error(err: dict[str, Any], key_env: str) -> ModelError:
    """A server ``error`` event during session setup as the instance's error (transient when
    ``is_transient``), the key scrubbed from its message."""
    msg = f"session setup failed: {err.get('code') or err.get('type')}: " \
          f"{scrub(err.get('message'), key_env)}"
    if is_transient(str(err.get("type") or ""), str(err.get("code") or "")):
        return TransientModelError(msg)
    return ModelError(msg)


class OpenAIRealtimeSession:
    """One live realtime websocket: the ``StreamingSession`` protocol over the SDK."""

    _key_env = KEY_ENV  # scrubbed from every server event

    def __init__(self, conn: Any, interrupt: bool, in_rate: int = PCM_RATE,
                 out_rate: int = PCM_RATE):
        self._conn = conn
        self._ws = getattr(conn, "_connection", None)  # the SDK's websockets connection
        self._interrupt = interrupt
        self._closed = False
        self._content_index: dict[str, int] = {}
        self.session: dict[str, Any] = {}
        self._in_rate, self._out_rate = in_rate, out_rate
        # what the provider reports (response.usage, summed) plus the audio each way: the
        # report's `model` service (data/usage.py)
        self.usage: dict[str, float] = {"responses": 0, "audio_in_s": 0.0,
                                        "audio_out_s": 0.0}

    async def _recv(self) -> dict[str, Any] | None:
        """The next server event as a dict, the key scrubbed from it before it is parsed
        (an ``ev`` / ``err`` local a traceback shows never holds it); None once we closed the
        socket ourselves."""
        raw = await receive(self._conn.recv_bytes, closed=lambda: self._closed,
                            dropped=_dropped, key_vars=(self._key_env,))
        if raw is None:
            return None
        # parsed, then scrubbed again (a key written with JSON escapes); a frame that is not a
        # JSON object is a server that does not speak the Realtime protocol
        return server_message(raw, "the realtime server", self._key_env, binary=True)

    async def configure(self, config: dict[str, Any]) -> None:
        """session.created, then our session.update until the server confirms it."""
        updated = False
        while True:
            ev = await self._recv()
            if ev is None:
                raise ModelError("the session closed during setup")
            kind = ev.get("type")
            if kind == "session.created":
                if not updated:
                    # send_raw, like the audio: the SDK's typed transform of this payload
                    # costs ~3 ms of loop time, which stalls sessions already streaming
                    await self._conn.send_raw(json.dumps({"type": "session.update",
                                                          "session": config}))
                    updated = True
            elif kind == "session.updated":
                self.session = ev.get("session") or {}
                return
            elif kind == "error":
                raise setup_error(ev.get("error") or {}, self._key_env)

    async def send(self, pcm: np.ndarray) -> None:
        # The hot path: one append per chunk per session, 50 a second each (docs/realtime.md,
        # "The cost of streaming"). The message is json.dumps's text, built by hand (base64
        # needs no escaping); it goes to the websocket itself, past the SDK's typed transform
        # and its send queue (a reconnect backlog, which a session that never reconnects
        # does not use: ~0.1 ms a call between them), and past websockets' asyncio wrapper
        # when nothing is in its way (ws_session.send_now).
        text = _APPEND_HEAD + b64_pcm(pcm) + '"}'
        ws = self._ws
        try:
            if ws is None:
                await self._conn.send_raw(text)
            elif not send_now(ws, text):  # closing, or a full write buffer: the library's way
                await ws.send(text)
        except (ConnectionClosed, OSError):
            raise TransientModelError("the realtime connection closed mid-instance") from None
        # counted once written: a chunk the closed connection refused is not billed
        self.usage["audio_in_s"] += len(pcm) / self._in_rate

    # the duplex hands send / send_nowait int16 chunks: pcm16 once per push, not per chunk
    input_pcm16 = True

    def send_nowait(self, pcm: np.ndarray) -> bool:
        """``send`` when it would not wait: the duplex's send clock calls this for every
        session due on one tick, so a chunk wakes no task (pipelines/pacing.py). False, having
        sent nothing, when the socket is not ready (closing, a full write buffer, or the
        SDK's own send queue in use): the duplex then awaits ``send``."""
        ws = self._ws
        if ws is None or not ready_now(ws):
            return False
        try:
            write_now(ws, _APPEND_HEAD + b64_pcm(pcm) + '"}')
        except (ConnectionClosed, OSError):
            raise TransientModelError("the realtime connection closed mid-instance") from None
        self.usage["audio_in_s"] += len(pcm) / self._in_rate
        return True

    async def events(self) -> AsyncIterator[Event]:
        while True:
            ev = await self._recv()
            if ev is None:
                return
            out = self._translate(ev)
            if out is not None:
                yield out

    def _translate(self, ev: dict[str, Any]) -> Event | None:
        kind = ev.get("type")
        if kind == "response.output_audio.delta":
            self._content_index.setdefault(ev["item_id"], ev.get("content_index", 0))
            audio = from_b64_pcm16(ev["delta"])
            self.usage["audio_out_s"] += len(audio) / self._out_rate
            return AudioDelta(ev["item_id"], audio)
        if kind == "response.output_audio_transcript.delta":
            return TranscriptDelta(ev["item_id"], ev.get("delta", ""))
        if kind == "input_audio_buffer.speech_started":
            return SpeechStarted(interrupt=self._interrupt)
        if kind == "response.output_item.done":
            item = ev.get("item") or {}
            return ItemDone(item["id"]) if item.get("id") else None
        if kind == "response.done":
            response = ev.get("response") or {}
            self.usage["responses"] += 1
            add_usage(self.usage, response.get("usage"))
            status = response.get("status") or "completed"
            if status == "failed":
                err = ((response.get("status_details") or {}).get("error") or {})
                why = scrub(err.get("message") or err.get("type"), KEY_ENV)
                return Error(f"response failed: {why}", code=err.get("code"), fatal=True,
                             transient=True)
            return ResponseDone(status)
        if kind == "error":
            err = ev.get("error") or {}
            kind_, code = str(err.get("type") or ""), str(err.get("code") or "")
            transient = is_transient(kind_, code)
            return Error(scrub(err.get("message") or kind_, KEY_ENV), code=code or kind_ or None,
                         fatal=transient, transient=transient)
        return None

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        try:
            await self._conn.conversation.item.truncate(
                item_id=item_id, content_index=self._content_index.get(item_id, 0),
                audio_end_ms=int(audio_end_ms))
        except ConnectionClosed:
            raise TransientModelError("the realtime connection closed mid-instance") from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:  # a server that never answers the close frame must not hold the instance
            await asyncio.wait_for(self._conn.close(), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.warning("the realtime server did not acknowledge the close in %ss",
                        CLOSE_TIMEOUT_S)


_FIELDS = {f.name: f for f in dataclasses.fields(OpenAIRealtime)}


def factory(**options: Any) -> OpenAIRealtime:
    """Build the model from ``--duplexact-model=gpt-realtime`` options (docs/realtime.md)."""
    if "api_key" in options:
        raise ModelConfigError("gpt-realtime: do not pass the API key as an option; set "
                               "OPENAI_API_KEY in the environment")
    unknown = sorted(set(options) - set(_FIELDS))
    if unknown:
        raise ModelConfigError(f"gpt-realtime: unknown option(s) {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(_FIELDS))}")
    return OpenAIRealtime(**{k: coerce("gpt-realtime", _FIELDS[k], v)
                             for k, v in options.items()})


def preflight(**options: Any) -> None:
    """Check the options and that OPENAI_API_KEY is set, without connecting (the registry
    calls this before any instance runs)."""
    factory(**options)


factory = Adapter(factory, preflight=preflight)
