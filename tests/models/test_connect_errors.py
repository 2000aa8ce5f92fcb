"""How each network adapter reports a failed handshake (model_options.connect_error): the
message says what to do, transient failures are retried, final ones are not, and a key the
server echoes back is never repeated. The messages are each adapter's own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers import gemini_live
from pytest_duplexact.models.providers import gpt_realtime as openai_realtime
from pytest_duplexact.models.providers import minicpm_o as minicpm_duplex
from pytest_duplexact.models.streaming_contract import ServerUnreachable, TransientModelError


class HTTPFailure(Exception):
    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.response = SimpleNamespace(status_code=status)


def openai(e):
    return openai_realtime.connect_failure(e, "gpt-realtime")


def grok(e):  # the dialects name their own key
    return openai_realtime.connect_failure(e, "grok-voice", "XAI_API_KEY")


def gemini(e):
    return gemini_live._connect_error(e, "gemini-live")


def minicpm(e):
    return minicpm_duplex.PEER.connect_error(e)


CASES = [
    (openai, HTTPFailure(401), ModelConfigError,
     "gpt-realtime: the server rejected the API key (HTTP 401); check OPENAI_API_KEY"),
    (grok, HTTPFailure(403), ModelConfigError,
     "grok-voice: the server rejected the API key (HTTP 403); check XAI_API_KEY"),
    (gemini, HTTPFailure(401), ModelConfigError,
     "gemini-live: the server rejected the API key (HTTP 401); check GEMINI_API_KEY / "
     "GOOGLE_API_KEY"),
    (minicpm, HTTPFailure(403), ModelConfigError,
     "minicpm-o: the server refused the connection (HTTP 403); check MINICPM_O_API_KEY"),
    (openai, HTTPFailure(404), ModelError,
     "gpt-realtime: HTTP 404 from the realtime endpoint: unknown model or wrong base URL"),
    (gemini, HTTPFailure(404), ModelError,
     "gemini-live: HTTP 404 from the Live API endpoint: unknown model, API version or base URL"),
    (minicpm, HTTPFailure(404), ModelError, "minicpm-o: HTTP 404 on connect: wrong server_url?"),
    (openai, HTTPFailure(429), TransientModelError,
     "gpt-realtime: HTTP 429 on connect (rate limit or server busy)"),
    (gemini, HTTPFailure(503), TransientModelError,
     "gemini-live: HTTP 503 on connect (rate limit or server busy)"),
    (minicpm, HTTPFailure(502), TransientModelError,
     "minicpm-o: HTTP 502 on connect (server busy)"),
    (openai, HTTPFailure(500), TransientModelError,
     "gpt-realtime: HTTP 500 on connect (rate limit or server busy)"),
    (minicpm, HTTPFailure(500), ModelError, "minicpm-o: HTTP 500 on connect: wrong server_url?"),
    (openai, HTTPFailure(400), ModelError, "gpt-realtime: HTTP 400 on connect"),
    # nothing listening: still transient, and marked so a run can tell its server is gone
    (openai, ConnectionRefusedError("refused"), ServerUnreachable,
     "gpt-realtime: could not connect: ConnectionRefusedError: refused"),
    (minicpm, TimeoutError("slow"), ServerUnreachable,
     "minicpm-o: could not connect: TimeoutError: slow"),
    (gemini, ValueError("bad"), ModelError, "gemini-live: could not connect: ValueError: bad"),
]


@pytest.mark.parametrize("adapter, error, kind, message", CASES)
def test_each_adapter_reports_a_failed_handshake_its_way(adapter, error, kind, message):
    got = adapter(error)
    assert type(got) is kind and str(got) == message


@pytest.mark.parametrize("adapter, var", [(openai, "OPENAI_API_KEY"), (gemini, "GOOGLE_API_KEY"),
                                          (minicpm, "MINICPM_O_API_KEY")])
def test_a_key_echoed_by_the_server_is_never_repeated(adapter, var, monkeypatch):
    monkeypatch.setenv(var, "sk-secret-123")
    got = str(adapter(OSError("handshake failed for key sk-secret-123")))
    assert "sk-secret-123" not in got and f"<{var}>" in got


@pytest.mark.parametrize("err, kind, message", [
    ({"type": "invalid_request_error", "code": "invalid_value", "message": "bad voice"},
     ModelError, "session setup failed: invalid_value: bad voice"),
    ({"type": "server_error", "message": "try later"}, TransientModelError,
     "session setup failed: server_error: try later"),
    ({"type": "invalid_request_error", "code": "rate_limit_exceeded", "message": "slow down"},
     TransientModelError, "session setup failed: rate_limit_exceeded: slow down"),
])
def test_gpt_realtime_and_its_dialects_map_a_setup_error_one_way(err, kind, message,
                                                                 monkeypatch):
    """openai_realtime.setup_error is what both configure() loops raise (the GA session and
    realtime_dialects.DialectSession); the dialect's own key is scrubbed."""
    monkeypatch.setenv("XAI_API_KEY", "xai-secret-9")
    got = openai_realtime.setup_error({**err, "message": err["message"] + " xai-secret-9"},
                                      "XAI_API_KEY")
    assert type(got) is kind and str(got) == message + " <XAI_API_KEY>"
