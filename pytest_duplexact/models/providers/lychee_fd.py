"""``--duplexact-model=lychee-fd``: Lychee-FD behind its own realtime HTTP API.

The protocol is ``register_realtime_session_routes`` in HITsz-TMG/Lychee-FD
``lychee_fd/app.py`` (the Vue frontend ``frontend/src/App.vue`` is its reference client):

1. ``POST /api/realtime/session/start`` (JSON options) -> ``{session_id, infer_window_ms}``
   (default 400 ms, at least 160); HTTP 503 while the models are still loading;
2. ``GET /api/realtime/session/{id}/events``: server-sent events ``event: TYPE`` / ``data:
   JSON``: ``assistant_text`` (``delta``, ``snapshot``, ``is_final``, ``round_id``),
   ``audio_chunk_pcm`` (``pcm_b64``: s16le, ``sample_rate`` 24 kHz), ``audio_chunk``
   (``wav_b64``), ``state_change`` (``from``/``to``: ``l`` listen, ``s`` speak;
   ``interrupt``), ``audio_interrupt`` (the model stopped its answer: queued audio dropped),
   ``status``, ``error``, ``done``, and a ``heartbeat`` every 0.5 s while idle;
3. ``POST /api/realtime/session/{id}/chunk``: a WAV body (resampled to 16 kHz server-side),
   one per ``infer_window_ms`` of microphone audio, sent in order as the frontend's upload
   queue does;
4. ``POST /api/realtime/session/{id}/stop``.

Mapping onto the streaming layer: one spoken turn (``state_change`` to ``s`` up to the next
turn or interruption) is one item; app.py pushes a round's ``assistant_text`` as the model
decodes it and that round's ``state_change`` at the round's end, so text that came before its
``state_change`` belongs to the turn that change starts; ``assistant_text`` is its native transcript;
``audio_interrupt`` is a barge-in (``SpeechStarted``): playback stops at its arrival
(``cut_on_interrupt=false`` lets the already queued audio play, as the frontend does). The
heartbeat makes the event stream's read deadline (``event_timeout``) a liveness check: a
server that stops answering fails the instance for a retry instead of holding it.

Bounds on what the server chooses: an audio event's sample rate must lie in ``RATE_RANGE``
(8-192 kHz) and its audio last at most ``MAX_EVENT_S`` seconds (checked on the base64 length
before decoding), else the instance is a model error naming the bound (a 1 Hz rate would make
a few KB of PCM gigabytes once resampled); an ``audio_chunk`` must be a WAV (a FLAC of silence
decodes to hundreds of times its size). One server-sent event is at most
``MAX_SSE_EVENT_BYTES`` (1 MiB, a line without its newline included), the session's
``infer_window_ms`` must lie in ``WINDOW_RANGE_MS`` (160-10,000 ms) and every JSON answer is read
up to ``MAX_ANSWER_BYTES`` (``http_server.py``); past each, a model error naming it. The text of
an ``error`` event and of ``assistant_text`` loses ``server_url``'s credentials before it goes
anywhere (a proxy that echoes its password back).
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import numpy as np

from ...data.audio import resample
from ...remote.netsafety import received_json
from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import ModelConfigError, build, check_server_url, require_positive, shown_url
from ..streaming_contract import (
    AudioDelta,
    Chunker,
    Error,
    Event,
    ItemDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from ..util.http_server import (
    CLOSE_TIMEOUT_S,
    client,
    deadline,
    json_body,
    reach_route,
    request,
    request_error,
    scrubbed,
    shut_down,
    wav_bytes,
)
from ..util.pcm import from_pcm16
from ..util.server_session import QueuedEvents, started

log = logging.getLogger(__name__)

LABEL = "lychee-fd"
INPUT_RATE = 16_000   # INPUT_SAMPLE_RATE
OUTPUT_RATE = 24_000  # TTS_SAMPLE_RATE
API = "/api/realtime/session"
RATE_RANGE = (8_000, 192_000)  # Hz: a server-chosen sample rate outside it is refused
MAX_EVENT_S = 30.0             # seconds of audio one event may carry (the server's are < 1 s)
MAX_CHANNELS = 8               # audio_chunk WAV channels
WAV_FORMATS = ("WAV", "WAVEX")  # audio_chunk containers (app.py sends WAV)
WINDOW_RANGE_MS = (160, 10_000)  # the server's infer_window_ms (app.py: at least 160)
MAX_SSE_EVENT_BYTES = 1 << 20  # one server-sent event (its audio: MAX_EVENT_S of 24 kHz fits)


class _BadAudio(ValueError):
    """An audio event past a bound: its message names the bound."""


@dataclass(frozen=True)
class LycheeFD(DuplexModel):
    """Options (``--duplexact-model-option``); the session fields are app.py's defaults."""

    server_url: str = field(default="", repr=False)  # http://HOST:7860
    infer_window_ms: int = 400
    prompt_voice: str | None = None   # one of GET /api/realtime/voices; None: the server's
    start_speak_factor: float = 1.2
    start_listen_factor: float = 1.2
    end_speak_factor: float = 1.0
    cut_on_interrupt: bool = True
    verify: bool = True
    connect_timeout: float = 20.0
    request_timeout: float = 30.0     # each POST
    event_timeout: float = 15.0       # the event stream's silence limit (heartbeat: 0.5 s)
    chunk_ms: float = 20.0

    input_sample_rate = INPUT_RATE
    output_sample_rate = OUTPUT_RATE

    def __post_init__(self):
        check_server_url(LABEL, self.server_url, "http://HOST:7860")
        if self.infer_window_ms < 160:
            raise ModelConfigError(f"{LABEL}: infer_window_ms must be >= 160 (the server's "
                                   f"minimum), got {self.infer_window_ms}")
        require_positive(LABEL, self, "connect_timeout", "request_timeout", "event_timeout",
                         "chunk_ms")

    @property
    def name(self) -> str:
        return LABEL

    @property
    def where(self) -> str:
        return shown_url(self.server_url)

    def start_payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"infer_window_ms": self.infer_window_ms,
                                "start_speak_factor": self.start_speak_factor,
                                "start_listen_factor": self.start_listen_factor,
                                "end_speak_factor": self.end_speak_factor}
        if self.prompt_voice:
            body["prompt_voice"] = self.prompt_voice
        return body

    async def connect(self, info: SessionInfo) -> "LycheeSession":
        return await started(LycheeSession(self))


def _check_rate(kind: str, rate: Any) -> int:
    lo, hi = RATE_RANGE
    try:
        ok = lo <= int(rate) <= hi and int(rate) == float(rate)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise _BadAudio(f"{kind} sample_rate {str(rate)[:40]!r} is outside {lo}-{hi} Hz (the "
                        "bound on a server-chosen rate)")
    return int(rate)


def _check_b64(kind: str, data: Any, max_bytes: float) -> bytes:
    if not isinstance(data, str):
        raise _BadAudio(f"{kind} carries no base64 audio")
    if len(data) * 3 // 4 > max_bytes:
        raise _BadAudio(f"{kind} carries {len(data) * 3 // 4} bytes of audio, more than "
                        f"{MAX_EVENT_S:g} s (the bound on one event)")
    try:
        return base64.b64decode(data)
    except ValueError:
        raise _BadAudio(f"{kind} carries invalid base64") from None


def _window_ms(body: dict[str, Any], ours: int) -> float:
    """The server's ``infer_window_ms`` (ours when it sends none) within ``WINDOW_RANGE_MS``:
    a window of 0 samples would never fill, a huge one never be sent."""
    window = body.get("infer_window_ms") or ours
    lo, hi = WINDOW_RANGE_MS
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not lo <= window <= hi:
        raise ModelError(f"{LABEL}: session/start answered infer_window_ms "
                         f"{str(window)[:40]!r}, outside {lo}-{hi} ms (the bound on the "
                         "server's window, WINDOW_RANGE_MS in models/providers/lychee_fd.py)")
    return float(window)


def _decode_pcm(msg: dict[str, Any]) -> tuple[np.ndarray, int]:
    rate = _check_rate("audio_chunk_pcm", msg.get("sample_rate") or OUTPUT_RATE)
    raw = _check_b64("audio_chunk_pcm", msg.get("pcm_b64") or "", MAX_EVENT_S * rate * 2)
    return from_pcm16(raw[: len(raw) // 2 * 2]), rate


def _decode_wav(data: Any) -> tuple[np.ndarray, int]:
    import soundfile as sf

    # a float64 WAV at the highest rate, stereo: the most bytes MAX_EVENT_S can take
    raw = _check_b64("audio_chunk", data, MAX_EVENT_S * RATE_RANGE[1] * 8 * 2 + 4096)
    try:
        info = sf.info(io.BytesIO(raw))
    except Exception as e:
        raise _BadAudio(f"audio_chunk is not a readable WAV ({type(e).__name__})") from None
    if info.format not in WAV_FORMATS:  # 77 KB of FLAC silence decode to 180 MB
        raise _BadAudio(f"audio_chunk is {str(info.format)[:20]}, not a WAV (a compressed "
                        "container decodes to far more than it carries)")
    rate = _check_rate("audio_chunk", info.samplerate)
    if not 1 <= info.channels <= MAX_CHANNELS or info.frames > MAX_EVENT_S * rate:
        raise _BadAudio(f"audio_chunk declares {info.frames} frames x {info.channels} "
                        f"channels: over {MAX_EVENT_S:g} s or {MAX_CHANNELS} channels (the "
                        "bound on one event)")
    x, sr = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
    return x.mean(axis=1), int(sr)


class LycheeSession(QueuedEvents):
    """One realtime session: the ``StreamingSession`` protocol over the HTTP + SSE API."""

    def __init__(self, model: LycheeFD):
        super().__init__()
        self._model = model
        self._http = client(verify=model.verify, connect_timeout=model.connect_timeout,
                            read_timeout=model.request_timeout)
        self.session_id: str | None = None
        self._chunks = Chunker(int(INPUT_RATE * model.infer_window_ms / 1000))
        self._uploads: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._turns = 0
        self._turn: str | None = None
        self._turn_heard = False  # the open turn has audio (app.py sends a round's text first)
        self._texts: dict[str, str] = {}
        self._opened = asyncio.Event()
        self._closed = False
        self.usage: dict[str, float] = {"audio_in_s": 0.0, "audio_out_s": 0.0, "chunks": 0,
                                        "turns": 0, "interrupts": 0}

    def _url(self, path: str) -> str:
        return self._model.server_url.rstrip("/") + path

    async def start(self) -> None:
        m = self._model
        try:
            r = await request(self._http, "POST", self._url(f"{API}/start"), LABEL,
                              "session/start", json=m.start_payload())
            r.raise_for_status()
        except ModelError:
            raise
        except Exception as e:
            raise request_error(e, LABEL, "session/start", m.server_url) from None
        body = json_body(r, LABEL, "session/start")
        sid = body.get("session_id")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool) or not str(sid):
            raise ModelError(f"{LABEL}: session/start answered without a session_id")
        self.session_id = str(sid)
        # the server's window, which may clamp ours
        self._chunks = Chunker(int(INPUT_RATE * _window_ms(body, m.infer_window_ms) / 1000))
        self._tasks = [asyncio.create_task(self._read_events()),
                       asyncio.create_task(self._upload())]
        try:  # the stream is open before the first chunk goes out
            await asyncio.wait_for(self._opened.wait(), m.connect_timeout)
        except asyncio.TimeoutError:
            raise TransientModelError(f"{LABEL}: the event stream did not open within "
                                      f"{m.connect_timeout:.0f}s") from None
        self._check()

    def _fail(self, error: ModelError) -> None:
        super()._fail(error)
        self._opened.set()

    # -- the event stream --

    async def _read_events(self) -> None:
        m = self._model
        try:
            async with self._http.sse(self._url(f"{API}/{self.session_id}/events"),
                                      timeout=deadline(m.connect_timeout, m.event_timeout),
                                      max_event_size=MAX_SSE_EVENT_BYTES) as src:
                src.response.raise_for_status()
                self._opened.set()
                async for sse in src:
                    self._put(*self._translate(sse.event, sse.data))
                    if sse.event == "done":
                        break
            if not self._closed:
                self._end()
        except asyncio.CancelledError:
            raise
        except httpx2.SSEError as e:  # past the event bound, or not an event stream at all
            if not self._closed:
                self._fail(ModelError(f"{LABEL}: the event stream: {self._scrubbed(e)} (the "
                                      "bound is MAX_SSE_EVENT_BYTES in models/providers/lychee_fd.py)"))
        except Exception as e:
            if not self._closed:
                self._fail(request_error(e, LABEL, "the event stream", m.server_url))

    def _open_turn(self) -> str:
        if self._turn is None:
            self._turns += 1
            self.usage["turns"] += 1
            self._turn = f"turn_{self._turns}"
            self._turn_heard = False
        return self._turn

    def _close_turn(self) -> list[Event]:
        turn, self._turn = self._turn, None
        return [ItemDone(turn)] if turn is not None else []

    def _translate(self, kind: str, data: str) -> list[Event]:
        try:  # parsed, then scrubbed again: a password written with JSON escapes
            msg = received_json(data) if data else {}
        except ValueError:
            return [Error(f"event {self._scrubbed(kind)[:80]!r} is not JSON", code="bad_event",
                          fatal=True)]
        if not isinstance(msg, dict):
            msg = {}
        if kind == "state_change":
            if str(msg.get("to", "")).lower() == "s" and str(msg.get("from", "")).lower() != "s":
                if self._turn is not None and not self._turn_heard:
                    return []  # the turn its text opened: app.py pushes a round's text first
                out = self._close_turn()
                self._open_turn()
                return out
            return []
        if kind == "assistant_text":
            return self._text(msg)
        if kind in ("audio_chunk_pcm", "audio_chunk"):
            return self._audio(kind, msg)
        if kind == "audio_interrupt":
            self.usage["interrupts"] += 1
            return [SpeechStarted(interrupt=self._model.cut_on_interrupt), *self._close_turn()]
        if kind == "error":
            why = msg.get("error") or msg.get("detail") or msg.get("message") or "unknown error"
            return [Error(self._scrubbed(why)[:500], code="server_error", fatal=True,
                          transient=True)]
        if kind == "done" and not self._closed:
            return [Error("the server ended the session mid-instance", code="done",
                          fatal=True, transient=True)]
        return []  # heartbeat, status, stage timing

    def _text(self, msg: dict[str, Any]) -> list[Event]:
        turn = self._open_turn()
        have = self._texts.get(turn, "")
        delta, snapshot = msg.get("delta"), msg.get("snapshot")
        if isinstance(snapshot, str) and snapshot.startswith(have) and len(snapshot) > len(have):
            new = snapshot[len(have):]  # the snapshot is authoritative where it extends ours
        elif isinstance(delta, str) and delta:
            new = delta
        else:
            return []
        self._texts[turn] = have + new
        return [TranscriptDelta(turn, self._scrubbed(new))]  # a password echoed back

    def _scrubbed(self, text: Any) -> str:
        return scrubbed(text, self._model.server_url)

    def _audio(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        try:
            audio, rate = _decode_pcm(msg) if kind == "audio_chunk_pcm" else \
                _decode_wav(msg.get("wav_b64") or "")
        except _BadAudio as e:
            return [Error(self._scrubbed(e), code="bad_audio", fatal=True)]
        if rate != OUTPUT_RATE:
            audio = resample(audio, rate, OUTPUT_RATE)
        if len(audio) == 0:
            return []
        self.usage["audio_out_s"] += len(audio) / OUTPUT_RATE
        turn = self._open_turn()
        self._turn_heard = True
        return [AudioDelta(turn, audio)]

    # -- input --

    async def _upload(self) -> None:
        m = self._model
        while True:
            x = await self._uploads.get()
            try:
                r = await request(
                    self._http, "POST", self._url(f"{API}/{self.session_id}/chunk"), LABEL,
                    "a chunk upload", content=wav_bytes(x),
                    headers={"Content-Type": "audio/wav",
                             "X-Client-Chunk-Sent-Epoch-Ms": str(int(time.time() * 1000))})
                r.raise_for_status()
            except asyncio.CancelledError:
                raise
            except ModelError as e:
                self._fail(e)
                return
            except Exception as e:
                self._fail(request_error(e, LABEL, "a chunk upload", m.server_url))
                return
            self.usage["chunks"] += 1
            self.usage["audio_in_s"] += len(x) / INPUT_RATE

    async def send(self, pcm: np.ndarray) -> None:
        """Collect pieces into whole inference windows; each is queued for upload the moment
        its last sample is due (uploads go out in order, off the wall clock's path)."""
        self._check()
        for x in self._chunks.push(pcm):
            self._uploads.put_nowait(x)

    async def close(self) -> None:
        """``stop`` so the server frees the session's worker, then drop the stream."""
        if self._closed:
            return
        self._closed = True
        if self.session_id is not None:
            try:
                await asyncio.wait_for(request(self._http, "POST",
                                               self._url(f"{API}/{self.session_id}/stop"),
                                               LABEL, "session/stop"), CLOSE_TIMEOUT_S)
            except Exception as e:  # a dead server must not hold the instance
                log.debug("%s: stop failed: %s", LABEL, type(e).__name__)
        await shut_down(self._http, self._tasks, LABEL)


def factory(**options: Any) -> LycheeFD:
    """Build the model from ``--duplexact-model=lychee-fd`` options (docs/models.md)."""
    return build(LycheeFD, LABEL, None, options)


def reach(**options: Any) -> str:
    """``duplexact models lychee-fd -o server_url=...``: whether Lychee-FD's app answers now."""
    m = factory(**options)
    return reach_route(LABEL, m.server_url, f"{API}/start", verify=m.verify)


factory = Adapter(factory, preflight=factory, reach=reach)  # preflight: options, server_url
