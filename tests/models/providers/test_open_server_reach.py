"""``duplexact models NAME -o server_url=...`` for the open models' own servers: one request
says whether that server answers now, against the fakes on 127.0.0.1 (each built from its
server's code), and says no, without a password, when something else or nothing answers."""

from __future__ import annotations

import asyncio
import socket

import pytest

from pytest_duplexact.cli.model_listing import render
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers.lychee_fd import factory as lychee
from pytest_duplexact.models.providers.mini_omni2 import factory as mini_omni2
from pytest_duplexact.models.providers.socketio_omni import freeze_omni, vita_15
from tests.support.realtime import load_fake_server

sio_fake = load_fake_server("socketio_server")
lychee_fake = load_fake_server("lychee_server")
omni_fake = load_fake_server("miniomni_server")


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"http://user:hunter2-secret@127.0.0.1:{port}"


async def _reach(build, url: str, **options: str) -> str:
    # reach is synchronous (a CLI call); the fake serves on this loop, so ask from a thread
    return await asyncio.to_thread(build.reach, server_url=url, **options)


@pytest.mark.asyncio
async def test_each_server_answers_its_own_probe_and_no_other():
    async with sio_fake.FakeOmniServer("freeze-omni") as sio, \
            sio_fake.FakeOmniServer("vita-1.5") as vita, \
            lychee_fake.FakeLycheeServer() as lyc, omni_fake.FakeMiniOmniServer() as omni:
        assert "socket.io server (engine.io handshake)" in await _reach(freeze_omni, sio.url,
                                                                        verify="false")
        assert "socket.io server" in await _reach(vita_15, vita.url, verify="false")
        assert "HTTP 405 on GET /api/realtime/session/start" in await _reach(lychee, lyc.url)
        assert "HTTP 405 on GET /chat" in await _reach(mini_omni2, omni.url)
        # another model's server at the address is said, not taken for this one
        with pytest.raises(ModelError, match="has no /api/realtime/session/start route"):
            await _reach(lychee, omni.url)
        with pytest.raises(ModelError, match="no engine.io handshake"):
            await _reach(freeze_omni, lyc.url)
        assert sio.sessions == [] and omni.sessions == [] and lyc.sessions == []  # no trial
        text, ready = await asyncio.to_thread(render, ["freeze-omni"],
                                           {"server_url": sio.url, "verify": "false"})
        assert ready and "reachable: a socket.io server" in text


@pytest.mark.parametrize("name,build", [("freeze-omni", freeze_omni), ("lychee-fd", lychee),
                                        ("mini-omni2", mini_omni2)])
def test_nothing_listening_is_a_clear_no_without_the_password(name, build):
    url = _dead_url()
    with pytest.raises(ModelError) as refused:
        build.reach(server_url=url)
    assert "hunter2-secret" not in str(refused.value)
    assert "127.0.0.1" in str(refused.value)
    text, ready = render([name], {"server_url": url})
    assert not ready and "not ready" in text and "hunter2-secret" not in text
