"""What the fake provider servers (gemini_server.py, realtime_server.py, minicpm_server.py)
share: the websocket server's lifecycle, the standalone-process entry point, scripted audio,
and the paced sending of a spoken turn with its transcript. Each provider's messages and
rules stay in its own module; only logic that is the same for all of them lives here.

The servers are run as scripts and loaded by path, never imported as a package, so each
puts its own folder on sys.path and imports this module by name."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import sys
from dataclasses import fields
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve

OUT_RATE = 24_000  # every imitated provider speaks 24 kHz by default
VAD_FRAME_MS = 20  # the servers' energy VADs decide per 20 ms frame


class JsonScript:
    """Mixin for a server's frozen ``Script`` dataclass: ``from_json`` for the standalone
    ``--script`` and the per-session ``SCRIPT {json}``, refusing unknown fields so that a
    typo fails loudly instead of falling back to a default."""

    @classmethod
    def from_json(cls, text: str):
        data = json.loads(text)
        bad = sorted(set(data) - {f.name for f in fields(cls)})
        if bad:
            raise ValueError(f"unknown script field(s): {', '.join(bad)}")
        return cls(**data)


# --- scripted audio -------------------------------------------------------------------------

def tone(n: int, hz: float, amplitude: float, offset: int = 0,
         rate: int = OUT_RATE) -> np.ndarray:
    """``n`` samples of a sine starting at sample ``offset``, so pieces made one after the
    other join up."""
    t = (np.arange(n) + offset) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def speech(path: str, seconds: float | None = None, rate: int = OUT_RATE) -> np.ndarray:
    """A speech recording (mono, resampled to ``rate``), cut to its first ``seconds``."""
    import soundfile as sf
    import soxr

    x, sr = sf.read(path, dtype="float32", always_2d=True)
    y = soxr.resample(x[:, 0], sr, rate)
    if seconds is not None:
        y = y[: round(seconds * rate)]
    return y.astype(np.float32)


def scripted_reply(script: Any, rate: int = OUT_RATE) -> np.ndarray:
    """A turn's audio: ``script.speak_s`` of its speech file (real speech, for a VAD) or of
    its tone."""
    if script.speech_file:
        return speech(script.speech_file, script.speak_s, rate)
    return tone(round(script.speak_s * rate), script.tone_hz, script.amplitude, rate=rate)


def b64_pcm16(x: np.ndarray) -> str:
    return base64.b64encode(np.round(np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
                            ).decode("ascii")


def energy_bounds(y: np.ndarray, sr: int, threshold: float = 0.05,
                  frame_s: float = 0.005) -> tuple[float, float] | None:
    """(onset, offset) in seconds of the frames whose RMS exceeds ``threshold``: enough to
    time the synthetic tone the fakes speak."""
    f = max(1, round(frame_s * sr))
    n = len(y) // f
    if n == 0:
        return None
    rms = np.sqrt((np.asarray(y[: n * f], dtype=np.float64).reshape(n, f) ** 2).mean(axis=1))
    loud = np.flatnonzero(rms > threshold)
    if len(loud) == 0:
        return None
    return loud[0] * f / sr, (loud[-1] + 1) * f / sr


async def pause(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep, waking early when ``stop`` is set (a barge-in); True when it was set. A zero
    wait still yields, so a turn sent "all at once" lets the client's events in."""
    if seconds > 0:
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            pass
    else:
        await asyncio.sleep(0)
    return stop.is_set()


# --- one connection -------------------------------------------------------------------------

class SpeakingConnection:
    """The state and timing a streaming fake (Gemini Live, OpenAI Realtime) keeps per
    websocket: the server clock, the input VAD's framing, its background tasks, and the
    paced sending of a turn. A subclass speaks its protocol through ``send_audio`` and
    ``send_words``; a turn is any object with ``audio_start``, ``audio_s`` and ``stop``."""

    def __init__(self, ws: ServerConnection, rec: Any):
        self.ws = ws
        self.rec = rec
        self.loop = asyncio.get_running_loop()
        self.t0: float | None = None
        self.pending = np.zeros(0, dtype=np.float32)
        self.frames = 0              # VAD frames analysed
        self.speaking = False
        self.silent_frames = 0
        self.last_voiced_end_ms = 0
        self.tasks: set[asyncio.Task] = set()

    def t(self) -> float:
        """Server time: seconds since the first input audio (the client's t = 0)."""
        return 0.0 if self.t0 is None else self.loop.time() - self.t0

    def start_clock(self) -> None:
        """At the first input audio. The loop clock is time.monotonic(), so tests in the same
        loop can put server times on their own timeline."""
        if self.t0 is None:
            self.t0 = self.loop.time()
            self.rec.t0_monotonic = self.t0

    def spawn(self, coro) -> asyncio.Task:
        """A background task of this connection, cancelled when it ends (``cancel_tasks``)."""
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    def drop_if_due(self, drop_after_ms: float | None) -> bool:
        """The scripted crash: abort the TCP connection once this much input arrived."""
        if drop_after_ms is None or self.rec.input_ms < drop_after_ms:
            return False
        self.rec.dropped = True
        self.ws.transport.abort()  # no close frame: what a crashed server looks like
        return True

    def vad_levels(self, samples: np.ndarray, frame_n: int,
                   dtype=np.float32) -> list[tuple[float, int]]:
        """The RMS level of each whole VAD frame of the input so far, with the frame's start
        (ms of input); a partial frame waits for the next audio. One numpy pass: a fake that serves a hundred sessions at 50 appends a
        second each must not spend its CPU on a reduction call per 20 ms frame."""
        self.pending = np.concatenate([self.pending, samples])
        n = len(self.pending) // frame_n
        if n == 0:
            return []
        frames = self.pending[: n * frame_n].reshape(n, frame_n).astype(dtype, copy=False)
        self.pending = self.pending[n * frame_n:]
        levels = np.sqrt(np.mean(frames * frames, axis=1)).tolist()
        first, self.frames = self.frames, self.frames + n
        return [(level, (first + i) * VAD_FRAME_MS) for i, level in enumerate(levels)]

    async def send_audio(self, turn: Any, chunk: np.ndarray, seconds: float) -> None:
        """Send one chunk (``seconds`` long) of the turn's audio and account for it in
        ``turn.audio_s``."""
        raise NotImplementedError

    async def send_words(self, turn: Any, piece: str) -> None:
        """Send one piece of the turn's transcript."""
        raise NotImplementedError

    async def stream_turn(self, turn: Any, audio: np.ndarray, rate: int, chunk_ms: float,
                          script: Any) -> bool:
        """Send ``audio`` in ``chunk_ms`` pieces at ``script.pace`` x real time (0: all at
        once), with the words of ``script.text`` all first (``transcript_first``, the worst
        case for a client) or interleaved in proportion to the audio sent. False as soon as a
        barge-in stops the turn (``turn.stop``), True when all of it went out."""
        step = max(1, round(chunk_ms / 1000 * rate))
        chunks = [audio[i:i + step] for i in range(0, len(audio), step)]
        words = script.text.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        if script.transcript_first:
            for p in pieces:
                await self.send_words(turn, p)
            pieces = []
        for n, chunk in enumerate(chunks):
            if turn.audio_start is None:
                turn.audio_start = self.t()
            await self.send_audio(turn, chunk, len(chunk) / rate)
            due = round(len(pieces) * (n + 1) / len(chunks)) if pieces else 0
            for p in pieces[:due]:
                await self.send_words(turn, p)
            pieces = pieces[due:]
            if await pause(turn.stop, len(chunk) / rate / script.pace if script.pace > 0 else 0):
                return False
        return True


# --- the server -----------------------------------------------------------------------------

class FakeServer:
    """``async with`` serves websockets on 127.0.0.1 at a free port. A subclass checks each
    handshake (``_process_request``) and runs each connection (``_handle``), appending what
    it records to ``sessions``; ``handshakes`` counts every attempt."""

    ssl_context: ssl.SSLContext | None = None  # set for a TLS-only provider

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self.handshakes = 0
        self._server = None

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1]

    def _process_request(self, connection: ServerConnection, request):
        raise NotImplementedError

    async def _handle(self, ws: ServerConnection) -> None:
        raise NotImplementedError

    async def __aenter__(self):
        self._server = await serve(self._handle, "127.0.0.1", 0, ssl=self.ssl_context,
                                   process_request=self._process_request, max_size=None,
                                   compression=None)
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        await self._server.wait_closed()


# --- run standalone -------------------------------------------------------------------------

def standalone_parser(doc: str) -> argparse.ArgumentParser:
    """The options every fake takes when run as its own process."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--script", default="{}", help="Script fields as JSON")
    parser.add_argument("--log", help="write every session's ground truth here (JSON) at exit")
    return parser


async def serve_until_stdin_closes(server: FakeServer, log: str | None) -> None:
    """Print ``PORT <n>`` for the parent process and serve until it closes our stdin (its way
    of stopping us, portable and without signals); then write each session's summary."""
    async with server:
        print(f"PORT {server.port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    if log:
        write_summaries(server.sessions, log)


def write_summaries(sessions: list[Any], log: str) -> None:
    with open(log, "w") as f:
        json.dump([s.summary() for s in sessions], f)
