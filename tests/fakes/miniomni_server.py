"""A protocol-faithful fake of Mini-Omni2's ``server.py`` (``POST /chat``), on 127.0.0.1.

As the real one: JSON ``{"audio": base64 WAV, "stream_stride", "max_tokens"}``; the answer
streams ``multipart/x-mixed-replace; boundary=frame``, for each step ``\\r\\n--frame\\r\\n``
``Content-Type: audio/wav\\r\\n\\r\\n`` + raw int16 24 kHz PCM, then ``\\r\\n--frame\\r\\n``
``Content-Type: text/plain\\r\\n\\r\\n`` + that step's text, no closing boundary; a failure is
HTTP 500 "An error occurred"; one request at a time (Flask ``threaded=False``: a lock here).

Instead of a model a ``Script``: ``compute_ms`` after the request arrived, ``steps`` parts of
``step_s`` audio each (a tone or a speech file) sent at ``pace`` x real time, the words of
``text`` spread over them. Ground truth on ``time.monotonic()``: each request's arrival, the
audio it carried, each audio part's send time and length.

Run standalone::  python tests/fakes/miniomni_server.py [--script JSON] [--log FILE]
"""

from __future__ import annotations

import asyncio
import base64
import io
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from aiohttp import web

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from fake_http import FakeHTTPServer, SpokenScript
from fake_ws import serve_until_stdin_closes, standalone_parser

OUT_RATE = 24_000


@dataclass(frozen=True)
class Script(SpokenScript):
    compute_ms: float = 200.0
    steps: int = 5
    step_s: float = 0.2
    pace: float = 2.0
    error: bool = False        # HTTP 500 "An error occurred"
    hang: bool = False         # accept the request, never answer
    drop_after_steps: int | None = None  # abort the connection after this many steps
    raw_bytes: int = 0         # > 0: answer 200, a part-like head and this many bytes, no boundary


@dataclass
class Request:
    index: int
    arrived: float
    audio_s: float
    rate: int
    stream_stride: Any
    max_tokens: Any
    sends: list[tuple[float, int]] = field(default_factory=list)
    dropped: bool = False

    def summary(self) -> dict[str, Any]:
        return dict(self.__dict__)


class FakeMiniOmniServer(FakeHTTPServer):
    """``async with FakeMiniOmniServer(script) as server:`` -> ``server.url``; ``sessions``
    holds one record per request (the protocol has no sessions)."""

    def __init__(self, script: Script = Script(), *, tls=None):
        super().__init__(tls)
        self.script = script
        self.lock = asyncio.Lock()
        self.overlapping = 0   # requests that arrived while another was being answered

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/chat", self.chat)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.lock.locked():
            self.overlapping += 1
        async with self.lock:
            try:
                return await self._answer(request)
            except ConnectionResetError:  # the client went away mid-reply (trial over)
                return web.Response(status=499)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        s = self.script
        try:
            body = await request.json()
            x, sr = sf.read(io.BytesIO(base64.b64decode(body["audio"].encode("utf-8"))),
                            dtype="float32")
        except Exception:
            return web.Response(status=500, text="An error occurred")
        rec = Request(len(self.sessions), time.monotonic(), len(x) / sr, int(sr),
                      body.get("stream_stride", 4), body.get("max_tokens", 2048))
        self.sessions.append(rec)
        if s.error:
            return web.Response(status=500, text="An error occurred")
        if s.hang:
            await asyncio.Event().wait()
        if s.raw_bytes:
            resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            await resp.prepare(request)
            await resp.write(b"Content-Type: text/plain\r\n\r\n")
            for k in range(0, s.raw_bytes, 1 << 20):
                await resp.write(b"x" * min(1 << 20, s.raw_bytes - k))
            await resp.write_eof()
            return resp
        resp = web.StreamResponse(headers={
            "Content-Type": "multipart/x-mixed-replace; boundary=frame"})
        await resp.prepare(request)
        await asyncio.sleep(s.compute_ms / 1000)
        n = int(round(s.step_s * OUT_RATE))
        voice = s.voice()
        words = s.text.split()
        for k in range(s.steps):
            if s.drop_after_steps is not None and k >= s.drop_after_steps:
                rec.dropped = True
                request.transport.abort()
                return resp
            audio = s.audio(voice, n, offset=k * n)
            a, b = len(words) * k // s.steps, len(words) * (k + 1) // s.steps
            text = " ".join(words[a:b]) + (" " if b < len(words) and b > a else "")
            pcm = np.round(np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
            sent = time.monotonic()
            await resp.write(b"\r\n--frame\r\nContent-Type: audio/wav\r\n\r\n" + pcm)
            await resp.write(b"\r\n--frame\r\nContent-Type: text/plain\r\n\r\n"
                             + text.encode())
            rec.sends.append((sent, n))
            await asyncio.sleep(s.step_s / s.pace if s.pace > 0 else 0)
        await resp.write_eof()
        return resp


async def _main(argv: list[str]) -> None:
    args = standalone_parser(__doc__).parse_args(argv)
    await serve_until_stdin_closes(FakeMiniOmniServer(Script.from_json(args.script)), args.log)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
