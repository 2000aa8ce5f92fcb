"""Each networked adapter pointed at a server that does not speak its protocol: its preflight
(the probe the run and ``duplexact models`` share) says so in one line, never ``[ready]``;
a frame of the wrong kind during a run is a short model error, never a traceback. The wrong
servers: the bridge kit (binary frames; a plain GET answered 426), and for the bridge route
a JSON-text server. A TLS-only socket.io server at an http:// URL gets the https hint."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_duplexact.cli.model_listing import render
from pytest_duplexact.models import probe
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers.minicpm_o import MiniCPMO, MiniCPMOSession
from pytest_duplexact.models.providers.minicpm_o import reach as minicpm_reach
from tests.bridges.support import scripted_server
from tests.fakes.hostile_ws import HostileWS, Inbox, hold
from tests.support.realtime import load_fake_server

sio_fake = load_fake_server("socketio_server")
minicpm_fake = load_fake_server("minicpm_server")


@pytest.fixture(scope="module")
def bridge_url():
    with scripted_server() as url:
        yield url


def http(url: str) -> str:
    return url.replace("ws://", "http://")


# name -> the options that point it at the bridge kit's address
AT_THE_BRIDGE = {
    "minicpm-o": lambda url: {"server_url": url},
    "vllm-omni": lambda url: {"url": url, "connect_timeout": "60", "close_timeout": "1"},
    "lychee-fd": lambda url: {"server_url": http(url)},
    "mini-omni2": lambda url: {"server_url": http(url)},
    "freeze-omni": lambda url: {"server_url": http(url)},
    "vita-1.5": lambda url: {"server_url": http(url)},
}
SAYS = {
    "minicpm-o": "minicpm-o: the server sent a binary message",
    "vllm-omni": "vllm-omni: the server sent a binary message",
    "lychee-fd": "lychee-fd: http://127.0.0.1:",
    "mini-omni2": "mini-omni2: http://127.0.0.1:",
    "freeze-omni": "freeze-omni: http://127.0.0.1:",
    "vita-1.5": "vita-1.5: http://127.0.0.1:",
}


@pytest.mark.parametrize("name", sorted(AT_THE_BRIDGE))
def test_the_preflight_recognises_a_server_that_does_not_speak_the_protocol(name, bridge_url):
    options = AT_THE_BRIDGE[name](bridge_url)
    with pytest.raises(ModelError) as refused:
        probe(name, **options)
    text = str(refused.value)
    # a bridge busy with another connection may close this one before READY: one line too
    closed = f"{name}: {bridge_url}" in text and "closed the connection" in text
    assert (text.startswith(SAYS[name]) or closed) and "\n" not in text, text
    assert closed or any(w in text for w in ("does not speak", "is it the model's",
                                             "no engine.io")), text
    listing, ready = render([name], options)
    assert not ready and "[ready]" not in listing and "not ready" in listing, listing


def test_the_bridge_route_recognises_a_json_text_server():
    async def gateway(ws):  # what the MiniCPM-o demo gateway says first
        await ws.send('{"type": "queue_done"}')
        await hold(ws)

    async def main():
        async with HostileWS(gateway) as server:
            with pytest.raises(ModelError) as refused:
                await asyncio.to_thread(probe, "bridge", url=server.url, ready_timeout="5")
            return str(refused.value)

    text = asyncio.run(main())
    assert "text WebSocket message" in text and "\n" not in text, text


def test_minicpm_o_reaches_its_own_gateway_and_gives_the_worker_back():
    async def main():
        async with minicpm_fake.FakeMiniCPMServer() as server:
            said = await asyncio.to_thread(minicpm_reach, server_url=server.url)
            return said, server

    said, server = asyncio.run(main())
    assert said.startswith("the MiniCPM-o demo gateway at ws://127.0.0.1:") and "free" in said


@pytest.mark.parametrize("raw, says", [
    (b"\x01\x00\x00\x80?", "a binary message (5 bytes) where JSON text was expected"),
    ("READY", "not JSON"),
    ("[1]", "a JSON list where an event object was expected"),
], ids=["binary", "not-json", "list"])
def test_minicpm_o_mid_run_a_frame_of_another_protocol_is_a_short_model_error(raw, says):
    async def main():
        s = MiniCPMOSession(Inbox([raw]), MiniCPMO(server_url="ws://127.0.0.1:9"), "adx_1")
        s._closed = True  # nothing to stop on the fake socket
        async for _ in s.events():
            pass

    with pytest.raises(ModelError) as failed:
        asyncio.run(main())
    assert says in str(failed.value) and "does not speak minicpm-o's protocol" in str(
        failed.value)
    assert not isinstance(failed.value.__context__, UnicodeDecodeError)


def test_minicpm_o_gives_up_on_a_server_that_says_nothing():
    async def main():
        async with HostileWS(hold) as server:
            with pytest.raises(ModelError) as refused:
                await asyncio.to_thread(minicpm_reach, server_url=server.url,
                                        connect_timeout="0.5")
            return str(refused.value)

    assert "no message from ws://127.0.0.1:" in asyncio.run(main())


def test_the_run_against_a_bridge_exits_4_in_one_line_with_no_run_folder(pytester, bridge_url):
    res = pytester.runpytest_subprocess(
        "--duplexact-model=minicpm-o", f"--duplexact-model-option=server_url={bridge_url}",
        "--duplexact-limit=1", "--duplexact-action=take_turn", "--duplexact-run-dir=run",
        "-p", "no:cacheprovider", timeout=120)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == 4, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "does not speak minicpm-o's protocol" in errors[0], out
    assert "Traceback" not in out and "UnicodeDecodeError" not in out
    assert not Path(pytester.path, "run").exists()


def test_freeze_omni_at_an_http_url_to_its_tls_only_server_gets_the_https_hint():
    """The preflight itself (models.probe, as the run's check_server calls it) against the
    fake's TLS-only server (trustme's certificate) at http://."""

    async def main():
        async with sio_fake.FakeOmniServer("freeze-omni") as server:
            url = server.url.replace("https://", "http://")
            assert url.startswith("http://127.0.0.1:")
            with pytest.raises(ModelError) as refused:
                await asyncio.to_thread(probe, "freeze-omni", server_url=url)
            listing, ready = await asyncio.to_thread(render, ["freeze-omni"],
                                                     {"server_url": url})
            return str(refused.value), listing, ready

    text, listing, ready = asyncio.run(main())
    assert "serves HTTPS only" in text and "\n" not in text, text
    assert "--duplexact-model-option server_url=https://HOST:PORT --duplexact-model-option " \
        "verify=false" in text
    assert not ready and "serves HTTPS only" in listing


def test_the_http_probe_has_an_overall_deadline_a_trickling_server_cannot_stretch():
    """lychee-fd, mini-omni2, freeze-omni and vita-1.5 probe with one GET: a server that sends
    a byte every 0.1 s never trips a per-read timeout; the probe's deadline is on the whole."""
    from pytest_duplexact.models.util import http_server
    from pytest_duplexact.pipelines.clock import Lateness, LoopMonitor

    async def trickle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 100000\r\n\r\n")
        while True:
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.1)

    async def main():
        lateness = Lateness()
        LoopMonitor.of().watch(lateness)
        server = await asyncio.start_server(trickle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        t0 = asyncio.get_running_loop().time()
        try:
            with pytest.raises(ModelError) as refused:
                await asyncio.to_thread(http_server.probe, "lychee-fd", url, "/x",
                                        verify=True, timeout=1.0)
        finally:
            server.close()
            LoopMonitor.of().unwatch(lateness)
        return str(refused.value), asyncio.get_running_loop().time() - t0, lateness

    text, took, lateness = asyncio.run(main())
    assert "hit its deadline (ReadTimeout: no whole answer within 1 s)" in text, text
    assert took < 1.0 + 1.0 + 2 * lateness.stall, took
