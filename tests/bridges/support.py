"""Serving a bridge model from a test: the real kit server on 127.0.0.1, in a thread of its own
(its own event loop: a test may talk to it with a blocking client), or the scripted bridge
(tests/fakes/bridge_server.py) in a process of its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pytest_duplexact.bridges import BridgeServer
from tests.support.servers import LISTENING, child


@contextmanager
def served(model: Any, port: int = 0, **server_options: Any) -> Iterator[BridgeServer]:
    """``model`` behind a ``BridgeServer`` on a loopback port (``port``, or a free one);
    yields the server (its ``url``); stops it on exit."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def start() -> None:
            box["server"] = BridgeServer(model, **server_options)
            await box["server"].start("127.0.0.1", port)

        try:
            loop.run_until_complete(start())
        except BaseException as e:  # surfaced in the test thread
            box["error"] = e
            started.set()
            return
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="bridge-server", daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError("the bridge server did not start within 30 s")
    if "error" in box:
        raise box["error"]
    server = box["server"]
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


SERVER = Path(__file__).parents[1] / "fakes" / "bridge_server.py"


@contextmanager
def scripted_server(script: dict | None = None, *extra: str,
                    env: dict | None = None) -> Iterator[str]:
    """tests/fakes/bridge_server.py in its own process on 127.0.0.1; yields its URL. Stopped
    with SIGTERM (killed if a scripted stall holds it)."""
    with child(SERVER, "--port", "0", "--script", json.dumps(script or {}), *extra,
               ready=LISTENING, stops_on_stdin=False, stop_s=10, stderr=subprocess.PIPE,
               env={**os.environ, **(env or {})}) as server:
        yield server.url
