"""``--duplexact-model=minicpm-o``: MiniCPM-o behind the MiniCPM-o demo's duplex WebSocket API.

The worked example of "an open model behind its own server" (docs/writing-an-adapter.md).
The protocol is the demo gateway's ``/ws/duplex/{session_id}`` (OpenBMB/MiniCPM-o-Demo,
docs/en/api/duplex.md, and its reference implementation in gateway.py / worker.py):

1. connect to ``ws(s)://HOST/ws/duplex/adx_<id>`` (the ``adx_`` prefix selects audio-only
   duplex); the gateway answers ``queued`` / ``queue_update`` while every GPU worker is busy,
   then ``queue_done``;
2. send ``prepare`` (system prompt + DuplexConfig), receive ``prepared``;
3. every ``step_ms`` (1 s) send one ``audio_chunk``: base64 float32 mono 16 kHz; each
   chunk gets one ``result``: ``is_listen`` (the model chose silence) or speech: ``text``
   and ``audio_data`` (base64 float32 24 kHz), ``end_of_turn`` at the turn's last step;
4. ``stop`` -> ``stopped``.

Field names follow the demo's server and web client where its API page differs
(``audio_base64`` not ``audio``, ``system_prompt`` not ``prefix_system_prompt``, errors in
``error`` not ``message``); ``prepare`` carries both prompt names.

Mapping onto the streaming layer (pipelines/streaming_duplex.py): the duplex pushes 20 ms pieces on
the wall clock; this session collects them into whole ``step_ms`` chunks, so each chunk goes
out the moment its last 20 ms is due, as from a live microphone. A model turn (consecutive
speak results) is one item. There is no VAD event: the model *itself* stops talking when it
hears the user, which shows as a listen result inside a turn (no ``end_of_turn``). That is
this protocol's barge-in: with ``cut_on_listen`` (default) the session reports it as
``SpeechStarted`` so the harness cuts the turn's queued audio at that instant (the demo's
browser player lets the queued second play out instead; ``cut_on_listen=false`` does that).
There is nothing to truncate server-side. ``usage`` counts steps and tokens per session.

The demo server has no authentication. If ``MINICPM_O_API_KEY`` is set (a server behind an
authenticating proxy) it is sent as a Bearer key, and the clear-text rule applies.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import numpy as np

# imported here, not lazily: a missing package fails the registry's preflight, by name
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import (
    ModelConfigError,
    build,
    check_transport,
    probe_connection,
    require_positive,
    scrub,
    server_message,
    shown_url,
    translated,
)
from ..streaming_contract import (
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Chunker,
    Error,
    Event,
    ItemDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
    admitting,
    stop_and_close,
)
from ..util.server_session import started
from ..util.ws_session import DuplexSocketSession, WsPeer, close_code, receive, sync_connect

log = logging.getLogger(__name__)

LABEL = "minicpm-o"
KEY_ENV = "MINICPM_O_API_KEY"
INPUT_RATE = 16_000   # DuplexConfig.sample_rate: float32 mono in
OUTPUT_RATE = 24_000  # result.audio_data: float32 mono out
CLOSE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class MiniCPMO(DuplexModel):
    """Options (``--duplexact-model-option``). The DuplexConfig defaults are the demo's."""

    server_url: str = ""             # the demo gateway, e.g. ws://127.0.0.1:8006 or https://host
    system_prompt: str = "You are a helpful assistant."
    ref_audio_path: str | None = None  # a voice reference on the *server's* disk
    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20
    force_listen_count: int = 3
    max_new_speak_tokens_per_chunk: int = 20
    listen_prob_scale: float = 1.0
    ls_mode: str = "explicit"
    step_ms: int = 1000              # DuplexConfig.chunk_ms: audio per step
    cut_on_listen: bool = True       # a listen result mid-turn stops playback (barge-in)
    allow_insecure: bool = False
    connect_timeout: float = 20.0
    queue_timeout: float = 600.0     # waiting for a free GPU worker
    prepare_timeout: float = 120.0   # system prompt prefill, TTS load
    chunk_ms: float = DEFAULT_CHUNK_MS

    input_sample_rate = INPUT_RATE
    output_sample_rate = OUTPUT_RATE

    def __post_init__(self):
        if not self.server_url:
            raise ModelConfigError(
                f"{LABEL}: no server. Start the MiniCPM-o demo gateway and pass its address "
                "as --duplexact-model-option server_url=ws://HOST:PORT (docs/models.md)")
        check_transport(LABEL, self.server_url, key_env=KEY_ENV,
                        carries_key=bool(os.environ.get(KEY_ENV)),
                        allow_insecure=self.allow_insecure)
        if self.step_ms <= 0 or self.chunk_ms <= 0:
            raise ModelConfigError(f"{LABEL}: step_ms and chunk_ms must be positive")
        require_positive(LABEL, self, "connect_timeout", "queue_timeout", "prepare_timeout")

    @property
    def name(self) -> str:
        return LABEL

    def endpoint(self, session_id: str) -> str:
        parts = urlsplit(self.server_url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path.rstrip("/") + f"/ws/duplex/{session_id}"
        return urlunsplit((scheme, parts.netloc, path, "", ""))

    def duplex_config(self) -> dict[str, Any]:
        return {"generate_audio": True, "chunk_ms": self.step_ms,
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "force_listen_count": self.force_listen_count,
                "max_new_speak_tokens_per_chunk": self.max_new_speak_tokens_per_chunk,
                "listen_prob_scale": self.listen_prob_scale, "ls_mode": self.ls_mode,
                "sample_rate": INPUT_RATE}

    def prepare_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"type": "prepare", "system_prompt": self.system_prompt,
                               "prefix_system_prompt": self.system_prompt,
                               "config": self.duplex_config()}
        if self.ref_audio_path:
            msg["ref_audio_path"] = self.ref_audio_path
        return msg

    def connect_options(self, url: str) -> dict[str, Any]:
        return PEER.options(url, self.connect_timeout)

    async def connect(self, info: SessionInfo) -> "MiniCPMOSession":
        session_id = f"adx_{secrets.token_hex(8)}"
        url = self.endpoint(session_id)
        options = self.connect_options(url)  # the key in a masked holder (BearerHeaders)
        ws = await PEER.connect(ws_connect, url, **options)
        return await started(MiniCPMOSession(ws, self, session_id))


PEER = WsPeer(LABEL, KEY_ENV, rejected="the server refused the connection",
              transient=frozenset({429, 502, 503, 504}), busy="server busy",
              other=": wrong server_url?")


def _error_text(msg: dict[str, Any]) -> str:
    return scrub(msg.get("error") or msg.get("message") or "unknown error", KEY_ENV)


def _b64_float32(data: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4").astype(np.float32)


class MiniCPMOSession(DuplexSocketSession):
    """One duplex session: the ``StreamingSession`` protocol over the demo's WebSocket."""

    def __init__(self, ws: Any, model: MiniCPMO, session_id: str):
        self._ws = ws
        self._model = model
        self.session_id = session_id
        self._step = int(round(INPUT_RATE * model.step_ms / 1000))
        self._chunks = Chunker(self._step)
        self._turns = 0
        self._turn: str | None = None  # the item id of the model turn in progress
        self._closed = False
        self.usage: dict[str, float] = {"steps": 0, "speak_steps": 0, "n_tokens": 0,
                                        "n_tts_tokens": 0, "audio_in_s": 0.0,
                                        "audio_out_s": 0.0}

    async def _recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        raw = await receive(self._ws.recv, closed=lambda: self._closed, timeout=timeout,
                            dropped=lambda e: PEER.dropped(e, self._model.server_url,
                                                           "the connection closed",
                                                           reason=True),
                            key_vars=(KEY_ENV,))  # scrubbed before any local holds it
        if raw is None:
            return None
        # scrubbed before and after parsing; a binary frame or non-JSON is a wrong server
        return server_message(raw, LABEL, KEY_ENV)

    async def start(self) -> None:
        """Wait in the queue for a worker, then prepare; returns once ``prepared``."""
        with admitting():  # the gateway's queue: bounded by queue_timeout, not model time
            await self._queued()
        await self._prepare()

    async def _queued(self) -> None:
        m = self._model
        loop = asyncio.get_running_loop()
        deadline = loop.time() + m.queue_timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise TransientModelError(f"{LABEL}: no worker free within "
                                          f"{m.queue_timeout:.0f}s (still queued)")
            try:
                msg = await self._recv(left)
            except asyncio.TimeoutError:
                continue
            kind = msg.get("type")
            if kind == "queue_done":
                break
            if kind == "error":  # e.g. "Queue full": try again later
                raise TransientModelError(f"{LABEL}: {_error_text(msg)}")
            if kind not in ("queued", "queue_update"):
                raise ModelError(f"{LABEL}: expected queue_done, got {str(kind)[:60]!r}")

    async def _prepare(self) -> None:
        m = self._model
        await self._ws.send(json.dumps(m.prepare_message()))
        try:
            msg = await self._recv(m.prepare_timeout)
        except asyncio.TimeoutError:
            raise TransientModelError(f"{LABEL}: no 'prepared' within "
                                      f"{m.prepare_timeout:.0f}s") from None
        if msg.get("type") == "error":
            raise ModelError(f"{LABEL}: prepare failed: {_error_text(msg)}")
        if msg.get("type") != "prepared":
            raise ModelError(f"{LABEL}: expected prepared, got {str(msg.get('type'))[:60]!r}")

    async def send(self, pcm: np.ndarray) -> None:
        """Collect 20 ms pieces; a whole step goes out when its last piece is due."""
        for chunk in self._chunks.push(pcm):
            audio = base64.b64encode(chunk.astype("<f4").tobytes()).decode("ascii")
            try:
                await self._ws.send(json.dumps({"type": "audio_chunk",
                                                "audio_base64": audio}))
            except ConnectionClosed:
                raise TransientModelError(f"{LABEL}: the connection closed "
                                          "mid-instance") from None
            self.usage["audio_in_s"] += len(chunk) / INPUT_RATE

    async def events(self) -> AsyncIterator[Event]:
        while True:
            msg = await self._recv()
            if msg is None:
                return
            for ev in translated(self._translate, msg, LABEL,
                                 shown_url(self._model.server_url), KEY_ENV):
                yield ev

    def _translate(self, msg: dict[str, Any]) -> list[Event]:
        kind = msg.get("type")
        if kind == "result":
            return self._result(msg)
        if kind == "error":
            # a failed step leaves a hole the model never filled: retry, never score silence
            return [Error(_error_text(msg), code="server_error", fatal=True, transient=True)]
        if kind == "timeout":
            return [Error("the server ended the session (pause timeout)", code="timeout",
                          fatal=True, transient=True)]
        if kind == "stopped" and not self._closed:
            return [Error("the server stopped the session mid-instance", code="stopped",
                          fatal=True, transient=True)]
        return []  # queue/pause chatter, client diagnostics

    def _result(self, r: dict[str, Any]) -> list[Event]:
        u = self.usage
        u["steps"] += 1
        u["n_tokens"] += int(r.get("n_tokens") or 0)
        u["n_tts_tokens"] += int(r.get("n_tts_tokens") or 0)
        out: list[Event] = []
        if r.get("is_listen", True):
            if self._turn is not None:
                # the model stopped mid-turn: it heard the user (this protocol's barge-in)
                out.append(SpeechStarted(interrupt=self._model.cut_on_listen))
                out.append(ItemDone(self._turn))
                self._turn = None
            return out
        u["speak_steps"] += 1
        if self._turn is None:
            self._turns += 1
            self._turn = f"turn_{self._turns}"
        turn = self._turn
        if r.get("audio_data"):
            audio = _b64_float32(r["audio_data"])
            u["audio_out_s"] += len(audio) / OUTPUT_RATE
            out.append(AudioDelta(turn, audio))
        if r.get("text"):
            out.append(TranscriptDelta(turn, r["text"]))
        if r.get("end_of_turn"):
            out.append(ItemDone(turn))
            self._turn = None
        return out

    async def _close(self) -> None:
        """``stop`` so the server frees its GPU worker at once, drain the results still in
        flight up to ``stopped``, then close the socket."""
        await stop_and_close(self._ws, json.dumps({"type": "stop"}),
                             lambda raw: server_message(raw, LABEL).get("type") == "stopped",
                             CLOSE_TIMEOUT_S, LABEL)


def factory(**options: Any) -> MiniCPMO:
    """Build the model from ``--duplexact-model=minicpm-o`` options (docs/models.md)."""
    return build(MiniCPMO, LABEL, KEY_ENV, options)


#: what the gateway says first on a duplex connection (its queue), whatever its load
QUEUE_MESSAGES = ("queued", "queue_update", "queue_done")


def reach(**options: Any) -> str:
    """``duplexact models minicpm-o -o server_url=...`` and the run's preflight: connect
    once and read the gateway's first message within ``connect_timeout`` overall. Its queue
    (``queued`` / ``queue_update`` / ``queue_done``) means the server speaks this protocol;
    anything else (a binary frame, another protocol's JSON, nothing) is one line saying it
    does not. A granted worker is given back at once (``stop``); nothing is prepared."""
    m = build(MiniCPMO, LABEL, KEY_ENV, options)
    url, where = m.endpoint(f"adx_probe_{secrets.token_hex(4)}"), shown_url(m.server_url)
    end = time.monotonic() + m.connect_timeout
    ws = probe_connection(
        lambda: sync_connect(url, close_timeout=CLOSE_TIMEOUT_S, **m.connect_options(url)),
        PEER.connect_error, f"is the MiniCPM-o demo gateway running at {where}?")
    try:
        try:
            msg = server_message(ws.recv(timeout=max(0.0, end - time.monotonic())), LABEL,
                                 KEY_ENV)
        except TimeoutError:
            why = f"{LABEL}: no message from {where} within {m.connect_timeout:g} s " \
                  "(connect_timeout): the demo gateway says its queue at once; is it the " \
                  "MiniCPM-o demo gateway?"
        except ConnectionClosed as e:
            why = f"{LABEL}: {where} closed the connection before saying anything " \
                  f"(close code {close_code(e)}): is it the " \
                  "MiniCPM-o demo gateway?"
        except ModelError as e:
            why = str(e)
        else:
            kind = msg.get("type")
            if kind == "queue_done":
                return f"the MiniCPM-o demo gateway at {where}: a worker is free"
            if kind in QUEUE_MESSAGES:
                return f"the MiniCPM-o demo gateway at {where}: all workers busy (queued)"
            if kind == "error":
                return f"the MiniCPM-o demo gateway at {where}: {_error_text(msg)[:200]}"
            why = f"{LABEL}: {where} answered {scrub(str(kind)[:60], KEY_ENV)!r}, not the " \
                  "demo gateway's queue: it does not speak minicpm-o's protocol (is the URL " \
                  "the right server?)"
        raise ModelConfigError(why)
    finally:
        try:
            ws.send(json.dumps({"type": "stop"}))
        except Exception:  # a wrong server may have gone already
            pass
        ws.close()


# the preflight builds the client: the options, server_url and the URL rule, no connection
factory = Adapter(factory, preflight=factory, reach=reach)
