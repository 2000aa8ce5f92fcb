"""No key in what ``pytest -l`` prints: every local of every frame of a failed connection or a
refused session, by repr (as pytest's --showlocals and junit's long report show them).

minicpm-o used to build its ``Authorization`` header in a frame local; gpt-realtime and
grok-voice kept the raw server event (a proxy echoing the request headers) in ``ev`` / ``err``
locals although the raised message was scrubbed."""

from __future__ import annotations

import socket

import pytest

from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.providers.gpt_realtime import factory as gpt_realtime
from pytest_duplexact.models.providers.minicpm_o import factory as minicpm
from pytest_duplexact.models.providers.realtime_dialects import grok_voice
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.support.realtime import fake
from tests.support.tracebacks import shown_with_locals


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.asyncio
async def test_minicpm_o_holds_its_key_masked_in_every_frame(monkeypatch):
    key = "mk-test-LEAKCHECK-0123456789abcdef"
    monkeypatch.setenv("MINICPM_O_API_KEY", key)
    model = minicpm(server_url=f"ws://127.0.0.1:{_closed_port()}", connect_timeout="5")
    with pytest.raises(ModelError) as failed:
        await model.connect(SessionInfo(instance=None))
    shown = shown_with_locals(failed.value)
    assert "could not connect" in shown
    assert key not in shown
    assert "Bearer ********" in shown  # the holder is there, masked


@pytest.mark.asyncio
@pytest.mark.parametrize("name, make, env, dialect", [
    ("gpt-realtime", gpt_realtime, "OPENAI_API_KEY", "openai"),
    ("grok-voice", grok_voice, "XAI_API_KEY", "xai"),
])
async def test_a_server_echoing_the_key_leaves_no_local_holding_it(name, make, env, dialect,
                                                                   monkeypatch):
    key = f"{dialect}-test-LEAKCHECK-0123456789abcdef"
    monkeypatch.setenv(env, key)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with fake.FakeRealtimeServer(dialect=dialect, echo_headers=True) as server:
        with pytest.raises(ModelError, match="session setup failed") as refused:
            await StreamingDuplex.open(make(base_url=server.base_url), None)
        assert server.sessions[0].authorization == f"Bearer {key}"  # it was echoed
    shown = shown_with_locals(refused.value)
    assert f"Bearer <{env}>" in shown  # the echo is there, scrubbed
    assert key not in shown
