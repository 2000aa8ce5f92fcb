"""The decision to refuse a key in clear, made on the URL alone (no connection is opened)."""

from __future__ import annotations

import pytest

from pytest_duplexact.judges import ConfigError, JudgeClient
from pytest_duplexact.remote.netsafety import ENV_ALLOW, insecure_url_problem


@pytest.mark.parametrize("url", [
    None, "", "https://api.openai.com/v1", "wss://api.x.ai/v1/realtime",
    "http://127.0.0.1:8000/v1", "http://127.9.9.9/v1", "http://localhost:11434/v1",
    "ws://[::1]:9000/realtime", "http://localhost./v1",
])
def test_allowed(url):
    assert insecure_url_problem(url, "base URL", env={}) is None


@pytest.mark.parametrize("url", [
    "http://10.0.0.5:8000/v1", "http://judge.example.com/v1", "ws://192.168.1.20/realtime",
    "HTTP://Judge.Example.com/v1", "http://[2001:db8::1]/v1", "http://127.0.0.1.nip.io/v1",
    # a *.localhost name is resolved through DNS by glibc here: loopback is an address
    "http://judge.localhost/v1", "ws://gpu.localhost:8765", "http://localhost.localdomain/v1",
])
def test_refused_with_the_way_out(url):
    problem = insecure_url_problem(url, "--duplexact-judge-base-url", env={})
    assert problem is not None and "unencrypted" in problem and ENV_ALLOW in problem
    assert insecure_url_problem(url, "x", env={ENV_ALLOW: "1"}) is None


def test_the_judge_client_refuses_before_any_request(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    monkeypatch.delenv(ENV_ALLOW, raising=False)
    with pytest.raises(ConfigError, match="unencrypted"):
        JudgeClient(base_url="http://judge.example.com/v1")


def test_the_plugin_refuses_at_start(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    monkeypatch.delenv(ENV_ALLOW, raising=False)
    res = pytester.runpytest_subprocess(
        "--duplexact-model=silent", "--duplexact-judge=gpt-5.4",
        "--duplexact-judge-base-url=http://judge.example.com/v1", "--duplexact-limit=1",
        "-p", "no:cacheprovider", timeout=120)
    assert res.ret == 4 and "unencrypted" in res.stderr.str()


def test_gpt_realtime_refuses_a_clear_base_url(monkeypatch):
    from pytest_duplexact.models.providers.gpt_realtime import ModelConfigError, factory

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    monkeypatch.delenv(ENV_ALLOW, raising=False)
    with pytest.raises(ModelConfigError, match="unencrypted"):
        factory(base_url="http://realtime.example.com/v1")


@pytest.mark.asyncio
async def test_websockets_debug_logging_shows_no_key(monkeypatch, caplog):
    """``--log-level=DEBUG``: websockets logs every handshake header; the plugin's filter
    (installed at configure, as in any run) masks the key in them."""
    import logging

    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    key = "sk-test-LOGLEAK-0123456789abcdef"
    monkeypatch.setenv("MINICPM_O_API_KEY", key)
    caplog.set_level(logging.DEBUG, logger="websockets")

    async def echo(ws):
        await ws.send(await ws.recv())

    async with serve(echo, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", open_timeout=10,
                           additional_headers={"Authorization": f"Bearer {key}"}) as ws:
            await ws.send(f"my key is {key}")
            assert await ws.recv() == f"my key is {key}"
    shown = "\n".join(r.getMessage() for r in caplog.records)
    assert "Authorization: Bearer <" in shown  # the header was logged, masked
    assert key not in shown and key not in caplog.text


def test_mask_secrets_covers_key_variables_and_header_values():
    from pytest_duplexact.remote.netsafety import mask_secrets

    env = {"XAI_API_KEY": "xai-0123456789", "HF_TOKEN": "hf_abcdefghij", "PATH": "/usr/bin:/bin",
           "SHORT_KEY": "abc"}
    text = "xai-0123456789 hf_abcdefghij /usr/bin:/bin abc x-goog-api-key: AIzaSECRET"
    assert mask_secrets(text, env) == ("<XAI_API_KEY> <HF_TOKEN> /usr/bin:/bin abc "
                                       "x-goog-api-key: <masked>")


def test_scrub_received_masks_every_kind_of_secret_in_one_place():
    """The one scrub of text from the network: the named key however short, any key-named
    variable's value, a bearer value and URL credentials; bytes decoded."""
    from pytest_duplexact.remote.netsafety import scrub_received

    env = {"MY_BRIDGE_KEY": "k3y", "OPENAI_API_KEY": "sk-live-12345678"}
    raw = (b"bad header Bearer abc.def; key k3y, sk-live-12345678 at "
           b"wss://user:hunter2@gpu:8765/x \xff")
    out = scrub_received(raw, ("MY_BRIDGE_KEY",), env=env)
    for secret in ("abc.def", "k3y", "sk-live-12345678", "hunter2"):
        assert secret not in out
    assert out == ("bad header Bearer <masked>; key <MY_BRIDGE_KEY>, <OPENAI_API_KEY> at "
                   "wss://***@gpu:8765/x \ufffd")
