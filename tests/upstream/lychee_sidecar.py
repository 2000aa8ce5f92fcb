"""Our stand-in for Lychee-FD's Token2Wav sidecar (``lychee_fd/token2wav_server.py``, port 8091),
the vocoder network: the four routes ``app.py``'s ``RemoteToken2WavClient`` posts to
(``/v1/token2wav/health|start|stream|close``, JSON), on 127.0.0.1 in the test's process.
``stream`` answers the PCM (s16le, 24 kHz) of the tokens it advances: speech token ``25 n + j``
(below 5000) is the ``j``-th 40 ms of the stub's 1 s answer voice (stubs/duplexact_turns.py)
at a gain of ``1 - n / 1000``, any other is silence; ``calls`` records each request."""

from __future__ import annotations

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from tests.support.servers import threaded
from tests.upstream.support import STUBS

if str(STUBS) not in sys.path:
    sys.path.insert(0, str(STUBS))
from duplexact_turns import ANSWER_S, voice  # the stubs' folder, put on the path above

RATE = 24_000
PER_TOKEN = RATE // 25
VOICE = voice(ANSWER_S, RATE)


def pcm_of(tokens: list[int]) -> bytes:
    out = np.zeros(len(tokens) * PER_TOKEN, np.float32)
    for k, token in enumerate(tokens):
        if not 0 <= token < 5000:
            continue
        n, j = divmod(token, 25)
        out[k * PER_TOKEN:(k + 1) * PER_TOKEN] = \
            VOICE[j * PER_TOKEN:(j + 1) * PER_TOKEN] * (1 - n / 1000)
    return np.round(out * 32767).astype("<i2").tobytes()


class Sidecar:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        sidecar = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name for it
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0))
                                  or b"{}")
                route = self.path.rsplit("/", 1)[-1]
                sidecar.calls.append((route, body))
                answer: dict = {"ok": True}
                if route == "stream":
                    tokens = [int(t) for t in body.get("tokens", [])]
                    n = len(tokens) if body.get("last_chunk") else int(body["advance_tokens"])
                    answer["pcm_b64"] = base64.b64encode(pcm_of(tokens[:n])).decode()
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.served = threaded(self.server)

    def __enter__(self) -> "Sidecar":
        self.served.start()
        return self

    def __exit__(self, *exc) -> None:
        self.served.stop()
