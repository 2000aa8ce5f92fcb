"""A bridge server of someone else's making, for the hostile tests: a handler function of
ours on a real WebSocket server on 127.0.0.1 (websockets' sync server, in a thread), so
anything the protocol allows a server to send (or not) can be sent."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
from websockets.sync.server import ServerConnection, serve

from pytest_duplexact.bridges import wire
from tests.support.servers import threaded

KEY_ENV = "DUPLEXACT_BRIDGE_API_KEY"
KEY = "bk-LEAKCHECK-0123456789abcdef"  # set as the bridge key; must never be shown


def ready(mode: str = "stepped", rate: int = 24_000, frame: int = 1_920, **extra) -> bytes:
    """A READY message (bypassing wire.Ready's checks, so a hostile one can be sent)."""
    import json

    body = {"protocol": wire.PROTOCOL, "version": wire.VERSION, "mode": mode,
            "sample_rate": rate, "frame": frame, "transcript": True, "model": "hostile",
            **extra}
    return wire.frame(wire.READY, json.dumps(body).encode())


def silence(n: int = 1_920) -> bytes:
    return wire.audio(np.zeros(n, np.float32))


def is_probe(ws: ServerConnection) -> bool:
    return wire.TRIAL_PARAM not in (ws.request.path if ws.request else "")


@contextmanager
def hostile_server(handler: Callable[[ServerConnection], None]) -> Iterator[str]:
    """``handler`` serving every connection; yields the ``ws://`` URL."""
    def guarded(ws: ServerConnection) -> None:
        try:
            handler(ws)
        except Exception:  # the client left or broke off: a hostile server does not care
            pass

    with serve(guarded, "127.0.0.1", 0, max_size=None, compression=None) as server, \
            threaded(server) as port:
        yield f"ws://127.0.0.1:{port}"


def audio_steps(ws: ServerConnection) -> Iterator[int]:
    """k for the k-th AUDIO the client sends (its PINGs answered, other kinds ignored); ends
    at the client's CLOSE, answered with CLOSE."""
    k = 0
    for message in ws:
        kind, payload = wire.split(message)
        if kind == wire.CLOSE:
            ws.send(wire.frame(wire.CLOSE))
            return
        if kind == wire.PING:
            ws.send(wire.frame(wire.PONG, payload))
        elif kind == wire.AUDIO:
            yield k
            k += 1


def lockstep(ws: ServerConnection, answer: Callable[[int], list[bytes]],
             frame: int = 1_920) -> None:
    """READY (probes included), then for each AUDIO step k the messages ``answer(k)``."""
    ws.send(ready(frame=frame))
    for k in audio_steps(ws):
        for m in answer(k):
            ws.send(m)
