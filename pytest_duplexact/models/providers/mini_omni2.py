"""``--duplexact-model=mini-omni2``: Mini-Omni2 behind its own turn-based ``/chat`` server.

The server (gpt-omni/mini-omni2 ``server.py``) is turn-based: ``POST /chat`` with JSON
``{"audio": base64 WAV, "stream_stride": 4, "max_tokens": 2048}`` answers with a streamed
``multipart/x-mixed-replace; boundary=frame`` body: for each generation step an audio part
(raw int16 PCM at 24 kHz, labelled ``Content-Type: audio/wav``) and a ``text/plain`` part,
each introduced by ``\\r\\n--frame\\r\\n`` and never closed. Flask runs it with
``threaded=False``: one request at a time, so this adapter runs one instance at a time
(``max_concurrency``; run it without ``-n`` as well). An error is HTTP 500 "An error occurred".

There is no duplex behaviour: the model's web UI (``webui/omni_gradio.py``, gradio_webrtc's
``ReplyOnPause``; ``webui/omni_streamlit.py`` does the same with ``utils/vad.py``) decides the
end of the user's turn on the client, and this adapter does what it does: every
``vad_chunk_s`` (0.6 s) of input it measures the speech in that chunk with silero VAD
(``utils/vad.py``'s ``VadOptions``: threshold 0.5, 250 ms minimum speech, 400 ms padding);
more than ``started_talking_s`` (0.2 s) starts a turn, and a chunk with less than
``speech_s`` (0.1 s) once started ends it: the audio from the chunk where talking started up
to that one is posted, at most 30 s of it (``whisper.pad_or_trim`` in ``inference.py`` keeps
no more). The reply plays as it streams back; input during a reply is not listened to (the
UI answers one pause at a time), and listening starts afresh when the reply has ended.

As in the paper, only Direct Replay runs it (``pipelines``); the session skips barge-in and
Simulator Replay instances as unsupported by this model, never scoring them as misses.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import ModelConfigError, build, check_server_url, require_positive, shown_url
from ..streaming_contract import AudioDelta, ItemDone, TranscriptDelta
from ..util.http_server import (
    bounded,
    client,
    reach_route,
    request_error,
    scrubbed,
    shut_down,
    wav_bytes,
)
from ..util.pcm import from_pcm16
from ..util.server_session import QueuedEvents

LABEL = "mini-omni2"
INPUT_RATE = 16_000
OUTPUT_RATE = 24_000   # OUT_RATE in the web UIs
MAX_TURN_S = 30.0      # whisper.pad_or_trim
BOUNDARY = b"\r\n--frame\r\n"
# One part is one generation step (stream_stride tokens: well under a second of 24 kHz
# audio, ~48 KB); a part this long without a boundary is not the model's reply, and buffering
# it further would only grow memory.
MAX_PART_BYTES = 8 * 1024 * 1024
SILERO = {"threshold": 0.5, "min_speech_duration_ms": 250, "min_silence_duration_ms": 2000,
          "speech_pad_ms": 400}  # utils/vad.py VadOptions (= gradio_webrtc's defaults)


@dataclass(frozen=True)
class MiniOmni2(DuplexModel):
    """Options (``--duplexact-model-option``)."""

    server_url: str = field(default="", repr=False)  # http://HOST:60808
    stream_stride: int = 4
    max_tokens: int = 2048
    vad_chunk_s: float = 0.6         # ReplyOnPause AlgoOptions.audio_chunk_duration
    started_talking_s: float = 0.2   # ... started_talking_threshold
    speech_s: float = 0.1            # ... speech_threshold
    verify: bool = True
    connect_timeout: float = 20.0
    read_timeout: float = 60.0       # the reply's silence limit between parts
    chunk_ms: float = 20.0

    input_sample_rate = INPUT_RATE
    output_sample_rate = OUTPUT_RATE
    max_concurrency = 1              # the server: Flask threaded=False
    pipelines = ("direct",)          # the paper ran it on Direct Replay only

    def __post_init__(self):
        check_server_url(LABEL, self.server_url, "http://HOST:60808")
        require_positive(LABEL, self, "stream_stride", "max_tokens", "vad_chunk_s",
                         "connect_timeout", "read_timeout", "chunk_ms")
        if not 0 <= self.speech_s <= self.started_talking_s <= self.vad_chunk_s:
            raise ModelConfigError(f"{LABEL}: need 0 <= speech_s <= started_talking_s <= "
                                   "vad_chunk_s")

    @property
    def name(self) -> str:
        return LABEL

    @property
    def where(self) -> str:
        return shown_url(self.server_url)

    async def connect(self, info: SessionInfo) -> "MiniOmni2Session":
        # load the VAD network now, not inside the first chunk (seconds, off the wall clock)
        await asyncio.to_thread(speech_seconds, np.zeros(int(self.vad_chunk_s * INPUT_RATE),
                                                         np.float32))
        return MiniOmni2Session(self)


def speech_seconds(x: np.ndarray) -> float:
    """Seconds of speech silero finds in ``x`` (16 kHz) with ``utils/vad.py``'s options: what
    ReplyOnPause compares with its thresholds."""
    from silero_vad import get_speech_timestamps_from_probs

    from ...listen.vad import speech_probabilities

    if len(x) == 0:
        return 0.0
    probs = speech_probabilities(np.asarray(x, np.float32))
    spans = get_speech_timestamps_from_probs([float(p) for p in probs], sampling_rate=INPUT_RATE,
                                             audio_length_samples=len(x), **SILERO)
    return sum(s["end"] - s["start"] for s in spans) / INPUT_RATE


class TurnDetector:
    """ReplyOnPause's decision, chunk by chunk: ``feed`` returns the turn's audio once a pause
    ends it, else None."""

    def __init__(self, model: MiniOmni2, measure=speech_seconds):
        self._n = int(round(model.vad_chunk_s * INPUT_RATE))
        self._started_s = model.started_talking_s
        self._speech_s = model.speech_s
        self._measure = measure
        self.reset()

    def reset(self) -> None:
        self._buffer: list[np.ndarray] = []
        self._buffered = 0
        self._stream: list[np.ndarray] = []
        self.started = False

    async def feed(self, pcm: np.ndarray) -> np.ndarray | None:
        self._buffer.append(pcm)
        self._buffered += len(pcm)
        if self._buffered < self._n:
            return None
        chunk = np.concatenate(self._buffer)
        self._buffer, self._buffered = [], 0
        dur = await asyncio.to_thread(self._measure, chunk)  # keeps the input clock on time
        if dur > self._started_s and not self.started:
            self.started = True
        if not self.started:
            return None
        self._stream.append(chunk)
        if dur < self._speech_s:
            turn = np.concatenate(self._stream)
            self.reset()
            return turn[: int(MAX_TURN_S * INPUT_RATE)]  # pad_or_trim keeps the start
        return None


class MultipartReader:
    """The reply's parts as they complete: a part ends where the next boundary starts (the
    server never closes the last one, so it ends with the body). Each byte is scanned once
    (the search resumes where the last one stopped), and a part is bounded: longer than
    ``max_part_bytes`` without a boundary, or a whole reply with none, is a ``ModelError``
    naming the bound, never a silent reply scored as a miss."""

    def __init__(self, max_part_bytes: int = MAX_PART_BYTES):
        self._buf = bytearray()
        self._scanned = 0          # bytes of _buf already searched for a boundary
        self._seen = False         # a boundary arrived
        self._max = max_part_bytes

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        self._buf += data
        out = []
        while True:
            i = self._buf.find(BOUNDARY, max(0, self._scanned - len(BOUNDARY) + 1))
            if i < 0:
                self._scanned = len(self._buf)
                if len(self._buf) > self._max:
                    raise ModelError(
                        f"{LABEL}: the reply sent more than {self._max} bytes without a "
                        f"multipart boundary ({BOUNDARY!r}; the bound is MAX_PART_BYTES in "
                        "models/providers/mini_omni2.py): is it the model's /chat server?")
                return out
            self._seen = True
            part = bytes(self._buf[:i])
            del self._buf[: i + len(BOUNDARY)]
            self._scanned = 0
            if part:
                out.append(_part(part))

    def flush(self) -> list[tuple[str, bytes]]:
        part = bytes(self._buf)
        self._buf, self._scanned = bytearray(), 0
        if part and not self._seen:
            raise ModelError(f"{LABEL}: the reply ({len(part)} bytes) had no multipart "
                             f"boundary ({BOUNDARY!r}): is it the model's /chat server?")
        return [_part(part)] if part else []


def _part(raw: bytes) -> tuple[str, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ModelError(f"{LABEL}: a reply part has no header")
    kind = ""
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-type":
            kind = value.strip().decode("latin-1").lower()
    return kind, body


class MiniOmni2Session(QueuedEvents):
    """One instance: client-side turns, one ``/chat`` request per turn."""

    def __init__(self, model: MiniOmni2):
        super().__init__()
        self._model = model
        self._http = client(verify=model.verify, connect_timeout=model.connect_timeout,
                            read_timeout=model.read_timeout)
        self._detector = TurnDetector(model)
        self._reply: asyncio.Task | None = None
        self._turns = 0
        self._closed = False
        self.usage: dict[str, float] = {"audio_in_s": 0.0, "audio_out_s": 0.0, "turns": 0}

    async def send(self, pcm: np.ndarray) -> None:
        self._check()
        if self._reply is not None and not self._reply.done():
            return  # answering: the UI does not listen until the reply has ended
        turn = await self._detector.feed(np.asarray(pcm, np.float32))
        if turn is not None:
            self._turns += 1
            self.usage["turns"] += 1
            self.usage["audio_in_s"] += len(turn) / INPUT_RATE
            self._reply = asyncio.create_task(self._chat(f"turn_{self._turns}", turn))

    async def _chat(self, item: str, audio: np.ndarray) -> None:
        m = self._model
        body = {"audio": base64.b64encode(wav_bytes(audio)).decode("ascii"),
                "stream_stride": m.stream_stride, "max_tokens": m.max_tokens}
        reader = MultipartReader()
        try:
            async with self._http.stream("POST", m.server_url.rstrip("/") + "/chat",
                                         content=json.dumps(body),
                                         headers={"Content-Type": "application/json"}) as r:
                if r.status_code >= 400:  # its error page's start (one that never ends)
                    (await bounded(r, LABEL, "POST /chat", cut=True)).raise_for_status()
                async for data in r.aiter_bytes():
                    self._parts(item, reader.feed(data))
            self._parts(item, reader.flush())
        except asyncio.CancelledError:
            raise
        except ModelError as e:
            self._fail(e)
            return
        except Exception as e:
            self._fail(request_error(e, LABEL, "POST /chat", m.server_url))
            return
        self._put(ItemDone(item))
        self._detector.reset()  # listening starts afresh after the reply

    def _parts(self, item: str, parts: list[tuple[str, bytes]]) -> None:
        for kind, body in parts:
            if kind.startswith("audio/"):
                audio = from_pcm16(body[: len(body) // 2 * 2])
                if len(audio):
                    self.usage["audio_out_s"] += len(audio) / OUTPUT_RATE
                    self._put(AudioDelta(item, audio))
            elif kind.startswith("text/"):
                text = scrubbed(body.decode("utf-8", errors="replace"), self._model.server_url)
                if text:
                    self._put(TranscriptDelta(item, text))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # dropping the connection ends the server's generator
        await shut_down(self._http, [self._reply] if self._reply else [], LABEL)


def factory(**options: Any) -> MiniOmni2:
    """Build the model from ``--duplexact-model=mini-omni2`` options (docs/models.md)."""
    return build(MiniOmni2, LABEL, None, options)


def reach(**options: Any) -> str:
    """``duplexact models mini-omni2 -o server_url=...``: whether its /chat server answers now
    (a GET, which it refuses: one POST at a time is all it serves)."""
    m = factory(**options)
    return reach_route(LABEL, m.server_url, "/chat", verify=m.verify)


factory = Adapter(factory, preflight=factory, reach=reach)  # preflight: options, server_url


__all__ = ["MiniOmni2", "MiniOmni2Session", "MultipartReader", "TurnDetector", "factory",
           "speech_seconds"]
