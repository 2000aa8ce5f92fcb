"""ws_session against websockets itself. send_now: websockets' own frame, written at once
when the library's asyncio wrapper would only check and write; refused (nothing sent) whenever
that wrapper would do more, so the caller's ``await ws.send`` applies its checks and waits.
sync_connect: an open connection on every websockets version the project allows."""

from __future__ import annotations

import asyncio
import warnings

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.sync.server import serve as sync_serve

from pytest_duplexact.models.util.ws_session import _FRAGMENT_MARKERS, send_now, sync_connect
from tests.support.servers import threaded, ws_collector


async def _with_server(body):
    got: list[str] = []
    done = asyncio.Event()

    async def handler(ws):
        async for message in ws:
            got.append(message)
            if message == "end":
                done.set()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", compression=None) as ws:
            await body(ws)
            await ws.send("end")
            await asyncio.wait_for(done.wait(), 10)
    return got


def test_frames_sent_at_once_arrive_whole_and_in_order_with_the_librarys_own():
    texts = ['{"type": "input_audio_buffer.append", "audio": "' + "QUJD" * n + '"}'
             for n in (0, 1, 300, 20_000)]  # 20 k: past the 16-bit length form

    async def body(ws):
        for k, t in enumerate(texts):
            if k % 2:
                await ws.send(t)
            else:
                assert send_now(ws, t)

    assert asyncio.run(_with_server(body)) == texts + ["end"]


def test_refused_when_the_wrapper_would_wait_or_raise():
    async def body(ws):
        ws.paused = True  # the transport's buffer over its high-water mark: drain would wait
        assert not send_now(ws, "a")
        ws.paused = False
        # a fragmented message is being sent (the marker's name is the installed version's)
        [marker] = [m for m in _FRAGMENT_MARKERS if hasattr(ws, m)]
        setattr(ws, marker, asyncio.get_running_loop().create_future())
        assert not send_now(ws, "b")
        setattr(ws, marker, None)
        assert send_now(ws, "c")
        await ws.close()
        assert not send_now(ws, "d")  # closed: ws.send raises ConnectionClosed instead

    async def run():
        async with ws_collector() as (ws, got):
            await body(ws)
        return got

    assert asyncio.run(run()) == ["c"]


def test_an_object_that_is_not_a_websockets_connection_is_refused():
    class Other:
        async def send(self, text):
            pass

    assert not send_now(Other(), "x")


def test_sync_connect_returns_an_open_connection_without_a_deprecation_warning():
    """websockets 17.1 warns when its sync ``connect`` is used outside ``with`` (the adapters
    hold their connection across calls); ``sync_connect`` keeps it quiet on every version."""
    def echo(ws):
        for message in ws:
            ws.send(message)

    with sync_serve(echo, "127.0.0.1", 0) as server, threaded(server) as port:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ws = sync_connect(f"ws://127.0.0.1:{port}", open_timeout=10)
            try:
                ws.send("hi")
                assert ws.recv(timeout=10) == "hi"
            finally:
                ws.close()
