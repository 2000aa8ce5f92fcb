"""``--duplexact-model=vllm-omni``: a duplex model served by vLLM-Omni's full-duplex endpoint,
``WS /v1/realtime?duplex=1`` (alias ``/v1/duplex``): OpenAI Realtime vocabulary plus duplex
extensions.

Written from vLLM-Omni's own wire contract (``docs/serving/realtime_duplex_api.md``) and its
client (``vllm_omni/clients/duplex.py``, the MiniCPM-o 4.5 preset ``clients/minicpmo_4_5.py``);
the facts we could not check against a running server are the tables below, and
docs/models.md says which ones are our reading.

One session:

1. connect (``?duplex=1&autostart=0&model=...``: autostart off, as their client does, so the
   server opens nothing before our ``session.update``); send ``session.update`` with the
   preset (``ref_audio``, ``overlap_policy``, ``playback_commit_policy``, ``extra_body``) and
   wait for ``session.created``. Its ``session.capabilities`` decide what the run does, never
   the model's name: barge-in, playback ack, multi-session, resume, ``chunk_period_ms``.
   An ``error`` instead is an admission refusal (``resource_exhausted``: transient, the
   instance is retried) or a configuration the deployment refuses (final).
2. input: ``input_audio_buffer.append`` (base64 pcm16 at 16 kHz unless the deployment says
   otherwise), one per ``append_ms`` of audio, each sent the moment its last sample is due.
3. output: ``response.output_audio.delta`` plays at 1x on the harness's playback clock
   (pipelines/streaming_duplex.py), ``response.output_audio_transcript.delta`` is the model's own
   words; ``response.speak`` / ``response.listen`` / ``overlap.decision`` / ``error`` codes are
   kept in the recording's events.
4. barge-in: the server cancels (``overlap.decision`` ``barge_in``, ``response.done``
   ``cancelled``, ``output_audio_buffer.cleared``) or the model itself listens mid-response
   (``response.listen``, with ``cut_on_listen``): playback stops at that instant.
5. ``playback.ack``: every ``ack_ms`` the cumulative milliseconds of each response a listener
   has heard by now (the harness's playback clock), and after a cut one ``truncate`` ack with
   what was heard, so the server's history holds what a listener heard (``ack_only``).
6. ``session.close``, read up to ``session.closed`` within ``close_timeout``. A session whose
   socket dropped is resumed only to be closed (``session.resume`` then ``session.close``),
   so its slot is free for the retry instead of held for ``disconnect_grace_s``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

# imported here, not lazily: a missing package fails the registry's preflight, by name
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ...bridges import wire
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
    tls_context,
    translated,
)
from ..streaming_contract import (
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Chunker,
    Error,
    Event,
    EventRate,
    ItemDone,
    Note,
    ResponseDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
    admitting,
    stop_and_close,
)
from ..util.pcm import b64_pcm, from_b64_pcm16
from ..util.server_session import started
from ..util.ws_session import WsPeer, ready_now, receive, sync_connect, write_now

log = logging.getLogger(__name__)

LABEL = "vllm-omni"
KEY_ENV = "VLLM_OMNI_API_KEY"  # only for a server behind an authenticating proxy (--api-key)

# --- the protocol's facts as data (docs/models.md: which of them are our reading) ------------

#: error codes / classes the server uses for "try again later": admission beyond
#: ``duplex_session.max_sessions``, its queue, an engine timeout
TRANSIENT_CODES = frozenset({"resource_exhausted", "duplex_session_admission_queue_full",
                             "timeout", "engine_error", "runtime_append_failed"})
TRANSIENT_TYPES = frozenset({"rate_limit_error", "server_error"})
TRANSIENT_HTTP = frozenset({429, 500, 502, 503, 504})
#: the end of a session the client did not ask for: the instance is retried from scratch
LOST = ("session.expired", "session.resync_required", "session.replaced")
#: what each of our pipelines needs the deployment to advertise (our reading of its caps:
#: barge-in instances need ``supports_barge_in``); ``skip_unsupported=false`` runs them anyway
PIPELINE_NEEDS = {"barge_in": "supports_barge_in"}
#: session settings a deployment without ``supports_barge_in`` refuses
BARGE_IN_POLICIES = frozenset({"barge_in_on_speech"})
_BYTES = {"pcm16": 2, "pcm_f32le": 4}
_ACK_PREFIX = "ack_"  # our playback.ack event ids: an error about one is not fatal


@dataclass(frozen=True)
class Deployment:
    """What ``session.created`` said: the model, the audio formats and the capabilities."""

    model: str
    capabilities: dict[str, Any]
    input_rate: int
    output_rate: int
    input_format: str

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.capabilities.get(name, default)
        return value if isinstance(value, bool) else default

    @property
    def chunk_period_ms(self) -> int | None:
        value = self.capabilities.get("chunk_period_ms")
        return value if isinstance(value, int) and value > 0 else None

    @property
    def max_sessions(self) -> int | None:
        """How many sessions the deployment serves at once, when it says: 1 without
        ``supports_multi_session``; else a ``max_sessions`` it advertises (our reading: the
        documented capabilities do not carry ``duplex_session.max_sessions``)."""
        if not self.flag("supports_multi_session", True):
            return 1
        value = self.capabilities.get("max_sessions")
        return value if isinstance(value, int) and value > 0 else None

    def describe(self) -> str:
        yes = {True: "yes", False: "no"}
        flags = ", ".join(f"{name.removeprefix('supports_').replace('_', ' ')} "
                          f"{yes[self.flag(name)]}" for name in (
                              "supports_barge_in", "supports_playback_ack",
                              "supports_audio_truncate", "supports_multi_session",
                              "supports_session_resume") if name in self.capabilities)
        period = self.chunk_period_ms
        level = self.capabilities.get("implementation_level", "?")
        sessions = self.max_sessions
        return (f"{self.model}: {level}, chunk period {period or '?'} ms, {flags}; "
                f"{self.input_format} {self.input_rate} Hz in, {self.output_rate} Hz out"
                + (f"; at most {sessions} session(s)" if sessions else ""))


def _rate(block: Any, default: int) -> int:
    """A sample rate from a ``session.audio.input`` / ``.output`` object (either spelling)."""
    if isinstance(block, dict):
        for value in (block.get("sample_rate_hz"), (block.get("format") or {}).get("rate")
                      if isinstance(block.get("format"), dict) else None):
            if isinstance(value, int) and value > 0:
                return value
    return default


def deployment_of(created: dict[str, Any], model: "VllmOmni") -> Deployment:
    """What ``session.created`` says; a sample rate outside the bridge's bound of any real
    audio (bridges/wire.py) is the server's error, named with the bound, never run."""
    session = created.get("session") if isinstance(created.get("session"), dict) else {}
    caps = session.get("capabilities") if isinstance(session.get("capabilities"), dict) else {}
    audio = session.get("audio") if isinstance(session.get("audio"), dict) else {}
    fmt = session.get("input_audio_format")
    rates = {side: _rate(audio.get(side), default)
             for side, default in (("input", model.input_rate), ("output", model.output_rate))}
    for side, rate in rates.items():
        if not wire.MIN_RATE <= rate <= wire.MAX_RATE:
            raise ModelError(f"{LABEL}: session.created from {shown_url(model.url)} says an "
                             f"{side} rate of {rate} Hz, outside the bound of {wire.MIN_RATE}-"
                             f"{wire.MAX_RATE} Hz (bridges/wire.py): a server error")
    return Deployment(model=str(session.get("model") or model.model)[:200],
                      capabilities=dict(caps), input_rate=rates["input"],
                      output_rate=rates["output"],
                      input_format=fmt if fmt in _BYTES else model.input_format)


def error_fields(msg: dict[str, Any]) -> tuple[str, str, str, str]:
    """(code, class, message, related event id) of an ``error`` in either of its shapes: the
    Realtime envelope, or the flat handshake one (``{"error": "...", "code": ...}``)."""
    err = msg.get("error")
    if isinstance(err, dict):
        return (str(err.get("code") or ""), str(err.get("type") or ""),
                scrub(err.get("message") or "", KEY_ENV), str(err.get("event_id") or ""))
    return str(msg.get("code") or ""), "", scrub(err or "", KEY_ENV), ""


def is_transient(code: str, kind: str) -> bool:
    return code in TRANSIENT_CODES or kind in TRANSIENT_TYPES


def refusal(msg: dict[str, Any]) -> ModelError:
    """An ``error`` instead of ``session.created``: admission (transient) or a configuration
    the deployment refuses (final, a one-line configuration error)."""
    code, kind, text, _ = error_fields(msg)
    why = f"{LABEL}: the server refused the session: {code or kind or 'error'}: {text}"
    if is_transient(code, kind):
        return TransientModelError(why + " (at capacity or busy; retried)")
    return ModelConfigError(why)


@dataclass(frozen=True)
class VllmOmni(DuplexModel):
    """Options (``--duplexact-model-option``). The defaults are vLLM-Omni's MiniCPM-o 4.5
    preset (``create_duplex_session_config``); docs/models.md has the table."""

    url: str = ""                    # ws://HOST:PORT/v1/realtime?duplex=1 (or /v1/duplex)
    model: str = "openbmb/MiniCPM-o-4_5"
    ref_audio: str = ""              # a voice clip: a local WAV file, or a data: URL
    instructions: str | None = None
    voice: str | None = None
    temperature: float | None = None
    overlap_policy: str = "listen_only"
    turn_detection: str = "none"     # or server_vad: a turn-based deployment answers on it
    playback_commit_policy: str = "ack_only"
    force_listen_count: int = 0      # extra_body, as the preset
    input_format: str = "pcm16"      # used when session.created does not say
    input_rate: int = 16_000
    output_rate: int = 24_000
    append_ms: float = DEFAULT_CHUNK_MS  # audio per input_audio_buffer.append
    ack_ms: float = 200.0            # playback.ack cadence while a response plays
    cut_on_listen: bool = True       # response.listen mid-response stops playback
    skip_unsupported: bool = True    # pipelines the deployment lacks a capability for
    max_sessions: int = 0            # cap concurrency below what the server says (0: none)
    allow_insecure: bool = False
    connect_timeout: float = 20.0    # connect, and session.created
    close_timeout: float = 5.0       # session.closed after session.close
    chunk_ms: float = DEFAULT_CHUNK_MS
    #: what the deployment advertised (set by ``factory`` from the probe, never an option)
    deployment: Deployment | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self.url:
            raise ModelConfigError(
                f"{LABEL}: no server. Start vllm-omni serve with a duplex deploy config and "
                "pass --duplexact-model-option url=ws://HOST:PORT/v1/realtime?duplex=1 "
                "(docs/models.md)")
        check_transport(LABEL, self.url, key_env=KEY_ENV,
                        carries_key=bool(os.environ.get(KEY_ENV)),
                        allow_insecure=self.allow_insecure)
        if self.turn_detection not in ("none", "server_vad"):
            raise ModelConfigError(f"{LABEL}: turn_detection must be none or server_vad, got "
                                   f"{self.turn_detection!r}")
        if self.input_format not in _BYTES:
            raise ModelConfigError(f"{LABEL}: input_format must be one of "
                                   f"{', '.join(_BYTES)}, got {self.input_format!r}")
        require_positive(LABEL, self, "input_rate", "output_rate", "append_ms", "ack_ms",
                         "connect_timeout", "close_timeout", "chunk_ms")
        if self.ref_audio and not self.ref_audio.startswith("data:") \
                and not Path(self.ref_audio).is_file():
            raise ModelConfigError(f"{LABEL}: ref_audio {self.ref_audio!r} is not a file "
                                   "(a WAV voice clip, sent as a data: URL)")

    @property
    def name(self) -> str:
        return LABEL

    @property
    def input_sample_rate(self) -> int:
        return self.deployment.input_rate if self.deployment else self.input_rate

    @property
    def output_sample_rate(self) -> int:
        return self.deployment.output_rate if self.deployment else self.output_rate

    @property
    def max_concurrency(self) -> int | None:
        """The deployment's capacity when it says, lowered by the ``max_sessions`` option."""
        caps = [c for c in (self.deployment.max_sessions if self.deployment else None,
                            self.max_sessions or None) if c]
        return min(caps) if caps else None

    def unsupported(self, pipeline: str) -> str | None:
        """Why this deployment cannot take part in ``pipeline`` (refused per instance, never
        scored: not applicable), from its capabilities."""
        need = PIPELINE_NEEDS.get(pipeline)
        if not need or not self.skip_unsupported or self.deployment is None \
                or self.deployment.flag(need):
            return None
        return (f"unsupported by this deployment: {self.deployment.model} at {LABEL} does "
                f"not advertise {need} (session.created capabilities), which {pipeline} "
                "replay needs")

    # -- the wire --

    def endpoint(self) -> str:
        """The duplex route: ``?duplex=1``, ``autostart=0`` (our session.update opens the
        session, as their client does) and the model; ``http(s)`` becomes ``ws(s)``."""
        parts = urlsplit(self.url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path if parts.path not in ("", "/") else "/v1/realtime"
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        if not path.rstrip("/").endswith("/duplex"):
            query.setdefault("duplex", "1")
        query.setdefault("model", self.model)
        query["autostart"] = "0"
        return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))

    def connect_options(self) -> dict[str, Any]:
        return PEER.options(self.endpoint(), self.connect_timeout)

    def session_update(self) -> dict[str, Any]:
        """The open handshake: the preset's session object (their ``SessionConfig``)."""
        session: dict[str, Any] = {
            "model": self.model, "modalities": ["audio", "text"],
            "input_audio_format": self.input_format, "output_audio_format": "pcm16",
            "sample_rate_hz": self.input_rate,
            "audio": {"input": {"sample_rate_hz": self.input_rate},
                      "output": {"sample_rate_hz": self.output_rate}},
            "turn_detection": ({"type": "server_vad"} if self.turn_detection == "server_vad"
                               else None),
            "overlap_policy": self.overlap_policy,
            "playback_commit_policy": self.playback_commit_policy,
            "extra_body": {"auto_response": True,
                           "force_listen_count": self.force_listen_count},
        }
        for key in ("instructions", "voice", "temperature"):
            if getattr(self, key) is not None:
                session[key] = getattr(self, key)
        if self.ref_audio:
            session["ref_audio"] = _data_url(self.ref_audio)
        return {"type": "session.update", "event_id": "evt_session", "session": session}

    def check(self, deployment: Deployment) -> Deployment:
        """Refuse at the start, in one line, what the deployment's capabilities rule out."""
        if not deployment.flag("supports_input_append", True):
            raise ModelConfigError(f"{LABEL}: {deployment.model} does not take streamed "
                                   "audio (supports_input_append false)")
        if (self.overlap_policy in BARGE_IN_POLICIES or self.turn_detection == "server_vad") \
                and not deployment.flag("supports_barge_in"):
            setting = (f"overlap_policy={self.overlap_policy}"
                       if self.overlap_policy in BARGE_IN_POLICIES else "turn_detection=server_vad")
            raise ModelConfigError(f"{LABEL}: {setting} needs barge-in, which "
                                   f"{deployment.model} does not support (supports_barge_in "
                                   "false); use listen_only and turn_detection=none")
        level = deployment.capabilities.get("implementation_level", "model_native_duplex")
        if level != "model_native_duplex" and self.turn_detection == "none":
            # nothing would ever commit a turn: the model would stay silent, scored as misses
            raise ModelConfigError(f"{LABEL}: {deployment.model} is {level}: it answers only "
                                   "a committed turn; pass turn_detection=server_vad")
        return deployment

    async def connect(self, info: SessionInfo) -> "VllmOmniSession":
        ws = await PEER.connect(ws_connect, self.endpoint(), **self.connect_options())
        return await started(VllmOmniSession(ws, self))


def dropped(e: ConnectionClosed, url: str) -> ModelError:
    """A closed connection in words (a message past the size bound is the server's error;
    any other drop is retried)."""
    return PEER.dropped(e, url, "the connection dropped")


def _data_url(value: str) -> str:
    if value.startswith("data:"):
        return value
    return "data:audio/wav;base64," + base64.b64encode(Path(value).read_bytes()).decode("ascii")


PEER = WsPeer(LABEL, KEY_ENV, rejected="the server refused the connection",
              not_found="the server: is this vLLM-Omni's duplex route (/v1/realtime?duplex=1)?",
              transient=TRANSIENT_HTTP, busy="at capacity or busy")


@dataclass
class _Response:
    """One assistant response as the ack loop tracks it."""

    item_id: str | None = None
    received_ms: float = 0.0
    acked_ms: int = 0
    done: bool = False    # the server sent response.done
    final: bool = False   # nothing more to acknowledge (played out, or cut and acked)


class VllmOmniSession:
    """One duplex session: the ``StreamingSession`` protocol over vLLM-Omni's Realtime duplex
    route (the module docstring has the order of things)."""

    def __init__(self, ws: Any, model: VllmOmni):
        self._ws = ws
        self._model = model
        self.deployment: Deployment | None = None
        self.session_id: str | None = None
        self._resume_token: str | None = None
        self._fmt = model.input_format
        self._rate = model.input_sample_rate
        self._chunks: Chunker | None = None
        self._audio_end_ms = 0.0
        self._responses: dict[str, _Response] = {}
        self._speaking: str | None = None  # the response being spoken (speak .. done)
        self._listening = True
        self._seq = 0                      # last server_event_seq received
        self._acked_seq = 0
        self._played = None                # played_ms(item) from the duplex's playback
        self._ack_task: asyncio.Task | None = None
        self._ack_ids = itertools.count(1)
        self._flood = EventRate(wire.MAX_EVENTS_PER_S)
        self._opened = time.monotonic()    # audio may run MAX_AHEAD_S ahead of this
        self._closed = False
        self._dropped = False
        self.acks: list[dict[str, Any]] = []  # every playback.ack sent (tests, debugging)
        self.usage: dict[str, float] = {"sessions": 1, "audio_in_s": 0.0, "audio_out_s": 0.0,
                                        "responses": 0, "listen_decisions": 0,
                                        "overlap_decisions": 0, "playback_acks": 0}

    # -- setup --

    async def _recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        raw = await receive(self._ws.recv, closed=lambda: self._closed, timeout=timeout,
                            dropped=self._drop)
        if raw is None:
            return None
        if self._flood.over(time.monotonic()):
            raise ModelError(f"{LABEL}: {shown_url(self._model.url)} sent more than "
                             f"{wire.MAX_EVENTS_PER_S} events in one second (the bound on a "
                             "server's events, bridges/wire.py): a flood, a server error")
        msg = server_message(raw, LABEL, KEY_ENV)
        seq = msg.get("server_event_seq")
        if isinstance(seq, int) and seq > self._seq:
            self._seq = seq
        return msg

    def _drop(self, e: ConnectionClosed) -> ModelError:
        self._dropped = True
        return dropped(e, self._model.url)

    async def start(self) -> None:
        """``session.update`` -> ``session.created`` (its capabilities), within
        ``connect_timeout``; an ``error`` instead is the admission or configuration refusal."""
        m = self._model
        await self._ws.send(json.dumps(m.session_update()))
        with admitting():  # the deployment's admission queue: bounded by connect_timeout
            msg = await self._created()
        self.deployment = m.check(deployment_of(msg, m))
        self._after_created(msg)

    async def _created(self) -> dict[str, Any]:
        m = self._model
        loop = asyncio.get_running_loop()
        end = loop.time() + m.connect_timeout
        while True:
            left = end - loop.time()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                msg = await self._recv(left)
            except asyncio.TimeoutError:
                raise TransientModelError(f"{LABEL}: no session.created within "
                                          f"{m.connect_timeout:g} s") from None
            kind = msg.get("type")
            if kind == "error":
                raise refusal(msg)
            if kind == "session.created":
                return msg

    def _after_created(self, msg: dict[str, Any]) -> None:
        m = self._model
        if m.deployment is not None and self.deployment.input_rate != m.input_sample_rate:
            raise ModelError(f"{LABEL}: the session takes {self.deployment.input_rate} Hz, "
                             f"the probe said {m.input_sample_rate} Hz")
        session = msg.get("session") if isinstance(msg.get("session"), dict) else {}
        self.session_id = str(session.get("id") or session.get("session_id") or "")[:200]
        self._resume_token = msg.get("resume_token")
        self._fmt, self._rate = self.deployment.input_format, self.deployment.input_rate
        self._chunks = Chunker(max(1, int(round(self._rate * m.append_ms / 1000))))

    def attach_playback(self, played_ms) -> None:
        """The duplex's playback clock: ``playback.ack`` reports what it has played."""
        self._played = played_ms
        if self.deployment is not None and self.deployment.flag("supports_playback_ack",
                                                                  True):
            self._ack_task = asyncio.create_task(self._ack_loop())

    # -- input --

    async def send(self, pcm: np.ndarray) -> None:
        """Whole ``append_ms`` appends, each the moment its last sample is due."""
        for chunk in self._chunks.push(pcm):
            try:
                await self._ws.send(self._append(chunk))
            except ConnectionClosed:
                raise self._dropped_under_send() from None
            self.usage["audio_in_s"] += len(chunk) / self._rate

    def send_nowait(self, pcm: np.ndarray) -> bool:
        """``send`` from the duplex's send clock, when the socket would not make it wait
        (ws_session.ready_now): most 20 ms pieces only join the pending append and write
        nothing; False, having taken nothing, otherwise (the duplex awaits ``send``)."""
        if not ready_now(self._ws):
            return False
        for chunk in self._chunks.push(pcm):
            try:
                write_now(self._ws, self._append(chunk))
            except (ConnectionClosed, OSError):
                raise self._dropped_under_send() from None
            self.usage["audio_in_s"] += len(chunk) / self._rate
        return True

    def _dropped_under_send(self) -> TransientModelError:
        """The connection went away under a send: marked, and the error both sends raise."""
        self._dropped = True
        return TransientModelError(f"{LABEL}: the connection dropped mid-instance")

    def _append(self, chunk: np.ndarray) -> str:
        """One append message, its running ``audio_end_ms`` advanced."""
        duration = 1000 * len(chunk) / self._rate
        self._audio_end_ms += duration
        return json.dumps({"type": "input_audio_buffer.append",
                           "audio": b64_pcm(chunk, self._fmt), "format": self._fmt,
                           "sample_rate_hz": self._rate, "duration_ms": round(duration),
                           "audio_end_ms": round(self._audio_end_ms)})

    # -- output --

    async def events(self) -> AsyncIterator[Event]:
        while True:
            msg = await self._recv()
            if msg is None:
                return
            for ev in translated(self.translate, msg, LABEL, shown_url(self._model.url),
                                 KEY_ENV):
                yield ev

    def translate(self, msg: dict[str, Any]) -> list[Event]:
        """One server event as the streaming layer's events (pure: tested without a socket)."""
        kind = msg.get("type")
        rid = msg.get("response_id")
        if not isinstance(rid, str):
            rid = (msg.get("response") or {}).get("id") if isinstance(msg.get("response"),
                                                                      dict) else None
        if kind == "response.output_audio.delta":
            return self._audio(rid, msg)
        if kind == "response.output_audio_transcript.delta" and rid and msg.get("delta"):
            return [TranscriptDelta(rid, str(msg["delta"]))]
        if kind == "response.speak":
            return self._speak(rid)
        if kind == "response.listen":
            return self._listen(rid)
        if kind == "response.done":
            response = msg.get("response")
            return self._done(rid, response if isinstance(response, dict) else {})
        if kind == "overlap.decision":
            self.usage["overlap_decisions"] += 1
            action = msg.get("action")
            out: list[Event] = [Note(f"overlap.decision {action} ({msg.get('reason')}, "
                                     f"policy {msg.get('policy')})")]
            return out + (self._cut() if action == "barge_in" else [])
        if kind == "output_audio_buffer.cleared":
            return [Note("output_audio_buffer.cleared"), *self._cut()]
        if kind == "input_audio_buffer.speech_started":
            return [Note("speech_started (server VAD)")]
        if kind == "error":
            return self._error(msg)
        if kind in LOST:
            return [Error(f"the server ended the session: {kind} ({msg.get('reason')})",
                          code=kind, fatal=True, transient=True)]
        if kind == "session.closed" and not self._closed:
            return [Error(f"the server closed the session mid-instance ({msg.get('reason')})",
                          code="session.closed", fatal=True, transient=True)]
        return []

    def _audio(self, rid: str | None, msg: dict[str, Any]) -> list[Event]:
        if not rid or not msg.get("delta"):
            return []
        rate = msg.get("sample_rate_hz")
        if isinstance(rate, int) and rate != self._model.output_sample_rate:
            raise ModelError(f"{LABEL}: audio at {rate} Hz, but the session said "
                             f"{self._model.output_sample_rate} Hz")
        fmt = msg.get("format")
        if fmt not in (None, "pcm16"):
            raise ModelError(f"{LABEL}: output audio format {fmt!r}; pcm16 expected")
        out = self._speak(rid) if self._speaking != rid else []
        audio = from_b64_pcm16(msg["delta"])
        ahead = self.usage["audio_out_s"] + len(audio) / self._model.output_sample_rate \
            - (time.monotonic() - self._opened)
        if ahead > wire.MAX_AHEAD_S:
            raise ModelError(f"{LABEL}: {shown_url(self._model.url)} sent audio more than "
                             f"{wire.MAX_AHEAD_S:g} s ahead of real time (the bound on "
                             "buffered audio, bridges/wire.py MAX_AHEAD_S): a server error")
        r = self._responses.setdefault(rid, _Response())
        item = msg.get("item_id")
        r.item_id = r.item_id or (item if isinstance(item, str) else None)
        r.received_ms += 1000 * len(audio) / self._model.output_sample_rate
        self.usage["audio_out_s"] += len(audio) / self._model.output_sample_rate
        return out + [AudioDelta(rid, audio)]

    def _speak(self, rid: str | None) -> list[Event]:
        if not rid or self._speaking == rid:
            return []
        self._speaking, self._listening = rid, False
        self._responses.setdefault(rid, _Response())
        self.usage["responses"] += 1
        return [Note(f"speak {rid}")]

    def _listen(self, rid: str | None) -> list[Event]:
        """A listen decision. One carrying the id of the response being spoken ends it (the
        model stopped talking because it heard the user): with ``cut_on_listen`` playback
        stops there. An id-less listen is a decision beat and ends nothing (as their
        client reads it)."""
        self.usage["listen_decisions"] += 1
        if rid is not None and rid == self._speaking and self._model.cut_on_listen:
            return [Note(f"listen mid-response {self._speaking}"), *self._cut()]
        if self._listening or self._speaking is not None:
            return []  # one entry per change, not one per chunk period
        self._listening = True
        return [Note("listen")]

    def _cut(self) -> list[Event]:
        """The response being spoken is cancelled: playback stops at this event's arrival
        (the duplex then calls ``truncate`` with what was heard)."""
        if self._speaking is None:
            return []
        self._speaking, self._listening = None, True
        return [SpeechStarted(interrupt=True)]

    def _done(self, rid: str | None, response: dict[str, Any]) -> list[Event]:
        status = str(response.get("status") or "completed")
        details = response.get("status_details") if isinstance(
            response.get("status_details"), dict) else {}
        out: list[Event] = []
        if status == "cancelled":
            out += [Note(f"response.done cancelled ({details.get('reason')})")]
            if rid is not None and rid == self._speaking:
                out += self._cut()
        elif rid is not None and rid == self._speaking:
            self._speaking = None
        if rid is not None:
            self._responses.setdefault(rid, _Response()).done = True
            out.append(ItemDone(rid))
        if status == "failed":
            out.append(Error(f"response {rid} failed ({details.get('reason')})",
                             code="response_failed", fatal=True, transient=True))
        return out + [ResponseDone(status)]

    def _error(self, msg: dict[str, Any]) -> list[Event]:
        code, kind, text, event_id = error_fields(msg)
        if event_id.startswith(_ACK_PREFIX):  # about one of our acks: the audio is unharmed
            return [Error(text, code=code or kind, fatal=False)]
        return [Error(text, code=code or kind, fatal=True, transient=is_transient(code, kind))]

    # -- playback truth --

    async def _ack(self, rid: str, r: _Response, played: int, truncate: bool = False) -> None:
        msg: dict[str, Any] = {"type": "playback.ack",
                               "event_id": f"{_ACK_PREFIX}{next(self._ack_ids)}",
                               "response_id": rid, "played_ms": played, "committed_ms": played}
        if r.item_id:
            msg["item_id"] = r.item_id
        if truncate and self.deployment is not None \
                and self.deployment.flag("supports_audio_truncate"):
            msg["truncate"] = True
        r.acked_ms = played
        self.acks.append(msg)
        self.usage["playback_acks"] += 1
        await self._ws.send(json.dumps(msg))

    async def acknowledge(self) -> None:
        """One round: each response's heard position where it moved, and the event cursor
        (``session.event_ack``: the server may trim its resume journal)."""
        for rid, r in list(self._responses.items()):
            if r.final or r.received_ms == 0:
                continue
            played = int(self._played(rid))
            if played > r.acked_ms:
                await self._ack(rid, r, played)
            if r.done and played >= int(r.received_ms):
                r.final = True
        if self._seq > self._acked_seq:
            self._acked_seq = self._seq
            await self._ws.send(json.dumps({"type": "session.event_ack",
                                            "server_event_seq": self._seq}))

    async def _ack_loop(self) -> None:
        try:
            while not self._closed:
                await asyncio.sleep(self._model.ack_ms / 1000)
                await self.acknowledge()
        except (ConnectionClosed, asyncio.CancelledError):
            pass
        except Exception as e:  # never kill the trial for a bookkeeping message
            log.debug("%s: playback ack failed: %s", LABEL, e)

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """After a cut: one ``truncate`` ack with what a listener heard of the response."""
        r = self._responses.setdefault(item_id, _Response())
        r.final = True
        if self._played is None or self.deployment is None \
                or not self.deployment.flag("supports_playback_ack", True):
            return
        try:
            await self._ack(item_id, r, int(audio_end_ms), truncate=True)
        except ConnectionClosed:
            self._dropped = True

    # -- the end --

    async def close(self) -> None:
        """``session.close`` and ``session.closed`` within ``close_timeout``; a dropped session
        is resumed just to close it, so its slot is free for the retry."""
        if self._closed:
            return
        if self._ack_task is not None:
            self._ack_task.cancel()
            try:
                await self._ack_task
            except (asyncio.CancelledError, Exception):
                pass
            if not self._dropped:
                try:
                    await asyncio.wait_for(self.acknowledge(), self._model.close_timeout)
                except Exception as e:
                    log.debug("%s: the last playback ack failed: %s", LABEL, e)
        self._closed = True
        if self._dropped:
            await self._release_dropped()
            return
        await self._close_on(self._ws)

    async def _close_on(self, ws: Any) -> None:
        await stop_and_close(ws, json.dumps({"type": "session.close"}),
                             lambda raw: server_message(raw, LABEL, KEY_ENV).get("type")
                             == "session.closed",
                             self._model.close_timeout, LABEL)

    async def _release_dropped(self) -> None:
        dep = self.deployment
        if dep is None or not dep.flag("supports_session_resume") or not self._resume_token:
            return  # the server reaps it after disconnect_grace_s
        try:
            ws = await ws_connect(self._model.endpoint(), **self._model.connect_options())
            await ws.send(json.dumps({"type": "session.resume", "session_id": self.session_id,
                                      "resume_token": self._resume_token,
                                      "last_received_server_event_seq": self._seq}))
        except Exception as e:
            log.debug("%s: could not resume the dropped session to close it: %s", LABEL, e)
            return
        await self._close_on(ws)


# --- the probe: the run's preflight and `duplexact models vllm-omni -o url=...` -------------

def probe(model: VllmOmni) -> Deployment:
    """Open one session, read ``session.created``, close it: what the deployment serves.
    Raises ``ModelConfigError`` with one line when nothing answers, it refuses, or what
    answers does not speak the protocol. Each wait has an overall deadline (a server that
    chatters but never says ``session.created`` or ``session.closed`` cannot hold it):
    ``connect_timeout`` for the connection and ``session.created``, ``close_timeout`` for
    ``session.closed``."""
    where = shown_url(model.url)
    ws = probe_connection(
        lambda: sync_connect(model.endpoint(), open_timeout=model.connect_timeout,
                             additional_headers=PEER.headers(), max_size=wire.MAX_MESSAGE,
                             compression=None, close_timeout=model.close_timeout,
                             **({"ssl": tls_context()} if model.endpoint().startswith("wss")
                                else {})),
        PEER.connect_error, f"is vllm-omni serving a duplex deploy config at {where}?")
    try:
        return _created(ws, model, where)
    finally:
        _close_probe(ws, model)


def _created(ws: Any, model: VllmOmni, where: str) -> Deployment:
    end = time.monotonic() + model.connect_timeout
    why, opened = None, False
    while why is None:
        left = end - time.monotonic()
        try:
            if not opened:  # a server that closes at once fails here: one line too
                ws.send(json.dumps(model.session_update()))
                opened = True
            if left <= 0:
                raise TimeoutError
            msg = server_message(ws.recv(timeout=left), LABEL, KEY_ENV)
        except TimeoutError:
            why = f"no session.created from {where} within {model.connect_timeout:g} s " \
                  "(connect_timeout)"
        except ConnectionClosed as e:
            why = f"{where} closed the connection before session.created: {dropped(e, where)}"
        except ModelError as e:
            why = str(e).removeprefix(f"{LABEL}: ")
        else:
            if msg.get("type") == "error":
                raise ModelConfigError(str(refusal(msg)))
            if msg.get("type") == "session.created":
                try:
                    return model.check(deployment_of(msg, model))
                except ModelError as e:
                    why = str(e).removeprefix(f"{LABEL}: ")
    raise ModelConfigError(f"{LABEL}: {why}")


def _close_probe(ws: Any, model: VllmOmni) -> None:
    """``session.close``, then read up to ``session.closed`` within ``close_timeout`` overall."""
    try:
        ws.send(json.dumps({"type": "session.close"}))
        end = time.monotonic() + model.close_timeout
        while (left := end - time.monotonic()) > 0:
            if server_message(ws.recv(timeout=left), LABEL, KEY_ENV).get("type") \
                    == "session.closed":
                break
    except Exception as e:  # the probe's answer is known; closing is a courtesy
        log.debug("%s: closing the probe session: %s", LABEL, type(e).__name__)
    ws.close()


def factory(**options: Any) -> VllmOmni:
    """Build the model from ``--duplexact-model=vllm-omni`` options: one probe session reads
    the deployment's capabilities, which the run then follows (docs/models.md)."""
    model = build(VllmOmni, LABEL, KEY_ENV, options)
    object.__setattr__(model, "deployment", probe(model))
    return model


def preflight(**options: Any) -> None:
    """The run's check before any instance: the options, then the probe (one line, exit 4)."""
    probe(build(VllmOmni, LABEL, KEY_ENV, options))


def reach(**options: Any) -> str:
    """``duplexact models vllm-omni -o url=...``: the model and its capabilities."""
    return probe(build(VllmOmni, LABEL, KEY_ENV, options)).describe()


factory = Adapter(factory, preflight=preflight, reach=reach)
