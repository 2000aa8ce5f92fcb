"""``--duplexact-model=freeze-omni`` and ``vita-1.5``: the two models whose demo servers speak
the same socket.io "audio pull" protocol, one client with a dialect table.

What the servers do (VITA-MLLM/Freeze-Omni ``bin/server.py``, ``web/resources/demo.html``;
the VITA-1.5 web demo ``web_demo/server.py`` in VITA-MLLM/VITA and its forks):

* the browser emits ``audio`` as a JSON *string* ``{"sample_rate": 16000, "audio": [uint8
  bytes of int16 PCM]}`` a few hundred samples at a time; the server queues it for its VAD
  (2560-sample chunks in Freeze-Omni, 4096 in VITA) and, **inside the same handler**, sends
  back at most one queued TTS segment (``audio``: raw int16 PCM, 24 kHz). Output is pulled:
  a client that stops sending hears nothing, so this one sends every chunk, silence included,
  until the trial ends (the streaming duplex does that on the wall clock);
* ``stop_tts``: the page drops its queue and stops playing. Freeze-Omni sends it before
  **every** answer, not only on a barge-in: when its state head says ``'ss'`` (the user's turn
  ended, ``server.py`` ``llm_prefill``) it calls ``interrupt()``, whose ``tts_over_time``
  becomes a ``stop_tts`` on the next ``audio`` message, in the same handler that may already
  carry the new answer's first segment (a fast model). So ``stop_tts`` is a barge-in
  (``SpeechStarted``, playback stops at its arrival) only while an *earlier* answer is still
  playing on the client; a segment that the same handler sent before it is the new answer's
  and plays after the cut (``_on_stop_tts``). Which handler sent what is read from the
  protocol, not from arrival gaps: each ``audio`` is emitted with a socket.io ack request, and
  the server acks after its handler returns, so the ack follows everything that handler
  emitted; a segment with no ack between it and the ``stop_tts`` rode on the same message
  (our reading of python-socketio's server: the ACK packet is sent when the handler returns,
  on the same ordered socket). VITA-1.5's server sends it when
  the output of its other LLM process arrives (that segment is dropped: the server's own
  behaviour) and on the page's buttons;
* ``too_many_users`` (``--max_users`` reached) and ``out_time`` (``--timeout`` per user):
  transient failures, the instance is retried from scratch;
* ``recording-started`` / ``recording-stopped``: the page's start and stop buttons (the
  server resets the user's state); ``prompt_text`` -> ``prompt_success`` sets a system prompt.

VITA-1.5's differences are the dialect's: ``response_text`` ``{"text": ...}`` follows the
first audio of each TTS segment (its native transcript, used as the timeline's text), and
``reset_state`` clears the server's shared dialogue history, sent at each session start so
instances do not leak into each other. VITA's server keeps one TTS output queue, one
history and one ``last_text`` for all its users (``web_demo/server.py``): two sessions at once
hear each other's audio, so this adapter runs one at a time (``max_concurrency``) unless
``max_sessions`` says otherwise, and refuses ``prompt_text`` (VITA has no handler for it).

Both servers always serve HTTPS with a self-signed certificate (``web/pem.py``;
``socketio.run(..., ssl_context=...)``, no flag turns it off): an ``http://`` URL is reset by
the server, and the connect error says to use ``https://`` with ``verify=false``. Certificates
are verified unless the user opts out with ``verify=false`` (docs/models.md): that option
accepts *any* certificate, so use it only for a server you started yourself.

Neither server has authentication. A ``server_url`` may carry ``user:password@`` for a proxy
in front of it: the password is never shown (``where``) nor logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

# imported here, not lazily: a missing package fails the registry's preflight, by name
import socketio

from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import (
    ModelConfigError,
    build,
    check_server_url,
    require_positive,
    scrub_url,
    shown_url,
)
from ..streaming_contract import (
    AudioDelta,
    Error,
    ItemDone,
    ServerUnreachable,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from ..util.http_server import probe, scrubbed
from ..util.pcm import from_pcm16, pcm16
from ..util.server_session import QueuedEvents, started

log = logging.getLogger(__name__)

INPUT_RATE = 16_000   # the pages' AudioContext({sampleRate: 16000})
OUTPUT_RATE = 24_000  # audioContext2 = new AudioContext({sampleRate: 24000})
CLOSE_TIMEOUT_S = 5.0
# recording-started's handler (its own thread on the server) emits stop_tts (Freeze-Omni twice,
# around interrupt()), then replaces the user's input FIFO (GlobalParams.reset()): audio that
# arrives before that is dropped with the old FIFO, so the session starts streaming only once
# the last of them came, and a moment after
RESET_SETTLE_S = 0.05
FULL = "the server is full (too_many_users: its --max_users reached)"


@dataclass(frozen=True)
class Dialect:
    """What differs between the servers' protocols (besides their VAD chunk, 2560 / 4096
    samples, which only changes what the server does with the input)."""

    label: str
    text_event: str | None         # native transcript event; None: the server sends no text
    reset_event: str | None        # emitted at session start to clear server-side history
    prime_samples: int = 0         # silence sent before the clock starts (see SocketIOSession)
    reset_stops: int = 1           # stop_tts emitted by recording-started, the last right
                                   # before the server replaces the user's input FIFO


DIALECTS: dict[str, Dialect] = {
    "freeze-omni": Dialect("freeze-omni", text_event=None, reset_event=None, reset_stops=2),
    # one VAD chunk of silence first: web_demo/wakeup_and_vad/wakeup_and_vad.py:186 reads
    # `last_audio`, set only by a chunk without speech start, so speech in the first chunk
    # the user's VAD thread sees kills that thread (the session is never answered)
    "vita-1.5": Dialect("vita-1.5", text_event="response_text", reset_event="reset_state",
                        prime_samples=4096),
}


@dataclass(frozen=True)
class SocketIOOmni(DuplexModel):
    """Options (``--duplexact-model-option``); ``dialect`` is set by the model's name."""

    server_url: str = field(default="", repr=False)  # https://HOST:8081 (may hold a password)
    dialect: str = "freeze-omni"
    verify: bool = True              # false: accept the server's self-signed certificate
    prompt_text: str | None = None   # Freeze-Omni's system prompt (prompt_text event)
    # sessions at once; 0: the dialect's (VITA-1.5: 1, its server shares one output queue
    # among users; Freeze-Omni: no cap, its --max_users answers too_many_users)
    max_sessions: int = 0
    transports: str = "polling,websocket"  # engine.io's default; "websocket" as in FDB's client
    cut_on_stop_tts: bool = True     # stop_tts stops playback now (the page's behaviour)
    connect_timeout: float = 20.0
    prompt_timeout: float = 30.0
    chunk_ms: float = 16.0           # each chunk one `audio` message (the page: 256 samples)

    input_sample_rate = INPUT_RATE
    output_sample_rate = OUTPUT_RATE

    def __post_init__(self):
        if self.dialect not in DIALECTS:
            raise ModelConfigError(f"unknown socket.io dialect {self.dialect!r}; known: "
                                   f"{', '.join(DIALECTS)}")
        check_server_url(self.name, self.server_url,
                         "https://HOST:8081 --duplexact-model-option verify=false")
        bad = set(self.transport_list) - {"polling", "websocket"}
        if bad or not self.transport_list:
            raise ModelConfigError(f"{self.name}: transports must be polling and/or websocket, "
                                   f"got {self.transports!r}")
        require_positive(self.name, self, "chunk_ms", "connect_timeout", "prompt_timeout")
        if self.max_sessions < 0:
            raise ModelConfigError(f"{self.name}: max_sessions must be >= 0 (0: the model's "
                                   "default)")
        if self.prompt_text is not None and self.dialect == "vita-1.5":
            raise ModelConfigError(
                "vita-1.5: prompt_text is Freeze-Omni's event; VITA-1.5's server "
                "(web_demo/server.py) has no handler for it, so no prompt would be set")

    @property
    def max_concurrency(self) -> int | None:
        """Instances in flight at once (run/harness.py reads it): VITA-1.5's server mixes its
        users' audio, so one unless ``max_sessions`` overrides it knowingly."""
        if self.max_sessions:
            return self.max_sessions
        return 1 if self.dialect == "vita-1.5" else None

    @property
    def name(self) -> str:
        return DIALECTS[self.dialect].label

    @property
    def where(self) -> str:
        """The server address as shown in messages (no password)."""
        return shown_url(self.server_url)

    @property
    def transport_list(self) -> list[str]:
        return [t.strip() for t in self.transports.split(",") if t.strip()]

    async def connect(self, info: SessionInfo) -> "SocketIOSession":
        return await started(SocketIOSession(self, DIALECTS[self.dialect]))


class SocketIOSession(QueuedEvents):
    """One user of the demo server: the ``StreamingSession`` protocol over socket.io."""

    def __init__(self, model: SocketIOOmni, dialect: Dialect):
        super().__init__()
        self._model = model
        self._dialect = dialect
        self._segments = 0
        self._open: str | None = None   # the segment still waiting for its text (VITA)
        # the client's playback as the streaming duplex places it (monotonic): where what
        # arrived runs dry, and the last segment (item, audio, text, the acks received before
        # it, where the audio before it ran dry) in case a stop_tts from the same server
        # handler (no ack between them) shows it opens a new answer
        self._played_until = 0.0
        self._last: list | None = None
        self._acks = 0  # server handlers of our audio messages that have returned
        self._prompted = asyncio.Event()
        # recording-started's stop_tts arrived, or the server refused or dropped the user
        self._stopped = asyncio.Event()
        self._full = False
        self._closed = False
        self.sid: str | None = None
        self.usage: dict[str, float] = {"audio_in_s": 0.0, "audio_out_s": 0.0, "segments": 0,
                                        "stop_tts": 0}
        sio = socketio.AsyncClient(reconnection=False, ssl_verify=model.verify,
                                   request_timeout=model.connect_timeout, logger=False,
                                   engineio_logger=False)
        sio.on("audio", self._on_audio)
        sio.on("stop_tts", self._on_stop_tts)
        sio.on("too_many_users", self._on_too_many_users)
        sio.on("out_time", self._on_out_time)
        sio.on("prompt_success", self._on_prompt_success)
        sio.on("disconnect", self._on_disconnect)
        if dialect.text_event:
            sio.on(dialect.text_event, self._on_text)
        self._sio = sio

    @property
    def label(self) -> str:
        return self._dialect.label

    async def start(self) -> None:
        m = self._model
        try:
            await asyncio.wait_for(
                self._sio.connect(m.server_url, transports=m.transport_list,
                                  wait_timeout=m.connect_timeout), m.connect_timeout)
        except asyncio.TimeoutError:
            raise TransientModelError(f"{self.label}: no socket.io handshake from {m.where} "
                                      f"within {m.connect_timeout:.0f}s") from None
        except Exception as e:
            raise self._connect_error(e) from None
        self.sid = self._sio.get_sid()  # the server's name for this user (its logs say it)
        if self._dialect.reset_event:
            await self._emit(self._dialect.reset_event)
        if m.prompt_text:
            await self._emit("prompt_text", m.prompt_text)
            try:
                await asyncio.wait_for(self._prompted.wait(), m.prompt_timeout)
            except asyncio.TimeoutError:
                raise TransientModelError(f"{self.label}: no prompt_success within "
                                          f"{m.prompt_timeout:.0f}s") from None
        self._stopped.clear()
        await self._emit("recording-started")  # the page's start button: a fresh state
        try:
            await asyncio.wait_for(self._stopped.wait(), m.connect_timeout)
        except asyncio.TimeoutError:
            raise TransientModelError(f"{self.label}: no stop_tts after recording-started "
                                      f"within {m.connect_timeout:.0f}s (the server's reset)"
                                      ) from None
        if self._full:
            raise TransientModelError(f"{self.label}: {FULL}")
        await asyncio.sleep(RESET_SETTLE_S)
        if self._dialect.prime_samples:
            await self._emit("audio", _message(np.zeros(self._dialect.prime_samples,
                                                        np.float32)), ack=True)

    def _connect_error(self, e: BaseException) -> ModelError:
        why = scrub_url(f"{type(e).__name__}: {e}", self._model.server_url)
        text = f"{self.label}: could not connect to {self._model.where}: {why}"
        if urlsplit(self._model.server_url).scheme == "http":
            text += f". {https_hint(self.label)}"
        elif self._model.verify:
            # engine.io reports a rejected certificate as a bare "Connection error"
            text += (". If the server uses the demo's self-signed certificate, pass the model "
                     "option verify=false to accept it (only for a server you trust)")
        return TransientModelError(text)

    async def _emit(self, event: str, data: Any = None, ack: bool = False) -> None:
        try:
            if data is None:
                await self._sio.emit(event)
            else:
                await self._sio.emit(event, data, callback=self._on_ack if ack else None)
        except socketio.exceptions.SocketIOError as e:
            raise TransientModelError(f"{self.label}: the connection closed mid-instance "
                                      f"({type(e).__name__})") from None

    # -- server events (socket.io handlers) --

    def _finish_open(self) -> None:
        if self._open is not None:
            self._put(ItemDone(self._open))
            self._open = None

    async def _on_audio(self, data: Any) -> None:
        if not isinstance(data, (bytes, bytearray)):
            self._put(Error(f"`audio` carried {type(data).__name__}, not PCM bytes",
                            code="bad_audio", fatal=True))
            return
        self._finish_open()
        audio = from_pcm16(bytes(data[: len(data) // 2 * 2]))
        self.usage["segments"] += 1
        self.usage["audio_out_s"] += len(audio) / OUTPUT_RATE
        now = time.monotonic()
        before = self._played_until
        self._played_until = max(now, before) + len(audio) / OUTPUT_RATE
        self._last = [self._segment(audio), audio, "", self._acks, before]

    def _on_ack(self, *_: Any) -> None:
        """The server's handler of one of our ``audio`` messages returned: whatever it emitted
        came before this, whatever arrives next is another handler's."""
        self._acks += 1

    def _segment(self, audio: np.ndarray) -> str:
        self._segments += 1
        item = f"seg_{self._segments}"
        self._put(AudioDelta(item, audio))
        if self._dialect.text_event:
            self._open = item  # its text follows (VITA: right after the segment's audio)
        else:
            self._put(ItemDone(item))
        return item

    async def _on_text(self, data: Any) -> None:
        text = data.get("text") if isinstance(data, dict) else data
        if isinstance(text, str) and text and self._open is not None:
            text = scrubbed(text, self._model.server_url)  # a password echoed back
            self._put(TranscriptDelta(self._open, text))
            if self._last is not None and self._last[0] == self._open:
                self._last[2] += text
        self._finish_open()

    async def _on_stop_tts(self, *_: Any) -> None:
        """A barge-in only while an earlier answer still plays (module docstring): the
        servers also send it before every answer and on the page's buttons."""
        self.usage["stop_tts"] += 1
        if self.usage["stop_tts"] >= self._dialect.reset_stops:
            self._stopped.set()
        self._finish_open()
        now = time.monotonic()
        last = self._last
        fresh = last is not None and last[3] == self._acks  # sent by this stop_tts's handler
        earlier_until = last[4] if fresh else self._played_until
        if earlier_until <= now:
            return  # nothing earlier is playing: the marker before an answer, not a cut
        cut = self._model.cut_on_stop_tts
        self._put(SpeechStarted(interrupt=cut))
        if not cut:
            return
        self._played_until = now
        if fresh:  # the new answer's first segment, queued behind what was cut: play it now
            _, audio, text, _, _ = last
            self._played_until = now + len(audio) / OUTPUT_RATE
            item = self._segment(audio)
            if text:
                self._put(TranscriptDelta(item, text))
            self._finish_open()
            self._last = None

    async def _on_too_many_users(self, *_: Any) -> None:
        self._full = True
        self._stopped.set()  # no reset will come: start() fails at once
        self._put(Error(FULL, code="too_many_users", fatal=True, transient=True))

    async def _on_out_time(self, *_: Any) -> None:
        self._stopped.set()
        self._put(Error("the server's per-user time limit ran out (out_time: its --timeout)",
                        code="out_time", fatal=True, transient=True))

    async def _on_prompt_success(self, *_: Any) -> None:
        self._prompted.set()

    async def _on_disconnect(self, *_: Any) -> None:
        self._stopped.set()
        self._end()

    # -- the StreamingSession protocol --

    async def send(self, pcm: np.ndarray) -> None:
        """One ``audio`` message per chunk, as the page's audio callback sends them."""
        if not self._sio.connected:
            raise TransientModelError(f"{self.label}: the connection closed mid-instance")
        await self._emit("audio", _message(pcm), ack=True)
        self.usage["audio_in_s"] += len(pcm) / INPUT_RATE

    async def close(self) -> None:
        """``recording-stopped`` (the server interrupts and resets the user), then disconnect
        so it frees the user's pipeline at once."""
        if self._closed:
            return
        self._closed = True
        if self._sio.connected:
            try:
                await asyncio.wait_for(self._sio.emit("recording-stopped"), CLOSE_TIMEOUT_S)
            except Exception as e:  # a dead server must not hold the instance
                log.debug("%s: recording-stopped failed: %s", self.label, type(e).__name__)
        try:
            await asyncio.wait_for(self._sio.disconnect(), CLOSE_TIMEOUT_S)
        except Exception as e:
            log.debug("%s: disconnecting failed: %s", self.label, type(e).__name__)


_BYTE_TEXT = [str(b) for b in range(256)]


def _message(pcm: np.ndarray) -> str:
    """One ``audio`` message as the page sends it: a JSON string of int16 bytes (json.dumps's
    compact text of ``{"sample_rate": ..., "audio": [bytes]}``, each byte's digits looked up:
    this runs 50 times a second per session)."""
    audio = ",".join(map(_BYTE_TEXT.__getitem__, pcm16(pcm)))
    return f'{{"sample_rate":{INPUT_RATE},"audio":[{audio}]}}'


def freeze_omni(**options: Any) -> SocketIOOmni:
    """``--duplexact-model=freeze-omni`` (docs/models.md)."""
    return _build("freeze-omni", options)


def vita_15(**options: Any) -> SocketIOOmni:
    """``--duplexact-model=vita-1.5`` (docs/models.md)."""
    return _build("vita-1.5", options)


def _build(dialect: str, options: dict[str, Any]) -> SocketIOOmni:
    if "dialect" in options:
        raise ModelConfigError(f"{dialect}: the dialect is set by the model name")
    return build(SocketIOOmni, dialect, None, {**options, "dialect": dialect})


def https_hint(label: str) -> str:
    """What to do when an ``http://`` URL meets the demo server, which serves TLS only."""
    return (f"The {label} server serves HTTPS only (its server.py passes ssl_context): use "
            "--duplexact-model-option server_url=https://HOST:PORT --duplexact-model-option "
            "verify=false (a self-signed certificate; only for a server you trust)")


def _reach(build) -> Any:
    def reach(**options: Any) -> str:
        """``duplexact models NAME -o server_url=...``: engine.io's handshake, the first thing
        python-socketio's client asks; it opens no socket.io session (no user slot is taken:
        the server's connect handler runs on the later CONNECT packet, never sent here)."""
        m = build(**options)
        try:
            r = probe(m.name, m.server_url, "/socket.io/?EIO=4&transport=polling",
                      verify=m.verify)
        except ServerUnreachable:
            raise
        except ModelError as e:  # something listens: at an http:// URL, a TLS-only server
            if urlsplit(m.server_url).scheme != "http":
                raise
            hinted = f"{e}. {https_hint(m.name)}"
        else:
            hinted = None
        if hinted is not None:  # raised here, not in the except that holds the library's
            raise ModelConfigError(hinted)
        if r.status_code != 200 or not r.text.startswith("0{") or '"sid"' not in r.text:
            raise ModelError(f"{m.name}: {shown_url(m.server_url)} answered HTTP "
                             f"{r.status_code} but no engine.io handshake: is it the model's "
                             "socket.io server?")
        return f"a socket.io server (engine.io handshake) at {shown_url(m.server_url)}"
    return reach


# the preflight builds the client (options, server_url) without connecting
freeze_omni = Adapter(freeze_omni, preflight=freeze_omni, reach=_reach(freeze_omni))
vita_15 = Adapter(vita_15, preflight=vita_15, reach=_reach(vita_15))
