"""The password of a server URL is masked in every form the client itself sends: as written,
percent-decoded, and inside the ``Authorization: Basic`` header that the HTTP and WebSocket
libraries build from the URL (base64 of ``user:password``). A server that echoes its request
headers (lychee-fd's error event, a proxy's error page) must not put that header in a report.
Each adapter registers the forms when its options are checked, before any connection."""

from __future__ import annotations

import base64
import json

import pytest

from pytest_duplexact.models import preflight
from pytest_duplexact.models.providers import lychee_fd
from pytest_duplexact.models.providers.lychee_fd import LycheeSession
from pytest_duplexact.models.providers.vllm_omni import VllmOmni
from pytest_duplexact.models.streaming_contract import Error, TranscriptDelta
from pytest_duplexact.remote import netsafety
from pytest_duplexact.remote.netsafety import received_json, scrub_received

USER, PASSWORD = "alice", "hunter2-Pw@xyz"
QUOTED = "hunter2-Pw%40xyz"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # what httpx / websockets send
BASIC_QUOTED = base64.b64encode(f"{USER}:{QUOTED}".encode()).decode()
LEAKS = (PASSWORD, QUOTED, BASIC, BASIC_QUOTED)


@pytest.fixture(autouse=True)
def nothing_remembered(monkeypatch):
    """Each test registers its own: what another adapter registered must not cover it."""
    monkeypatch.setattr(netsafety, "_CONFIGURED", {})


def url(scheme: str, port: int) -> str:
    return f"{scheme}://{USER}:{QUOTED}@127.0.0.1:{port}"


CHECKED = {  # each adapter's options check, which connects to nothing
    "lychee-fd": lambda p: preflight("lychee-fd", server_url=url("http", p)),
    "mini-omni2": lambda p: preflight("mini-omni2", server_url=url("http", p)),
    "freeze-omni": lambda p: preflight("freeze-omni", server_url=url("https", p)),
    "minicpm-o": lambda p: preflight("minicpm-o", server_url=url("ws", p)),
    "bridge": lambda p: preflight("bridge", url=url("ws", p)),
    "vllm-omni": lambda p: VllmOmni(url=url("ws", p)),
}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_every_form_of_a_url_password_is_masked_once_the_options_are_checked(name):
    port = 1000 + sorted(CHECKED).index(name)
    CHECKED[name](port)
    echo = (f"401 for {url('http', port)}: Authorization: Basic {BASIC} / Basic {BASIC_QUOTED}"
            f"; got {PASSWORD} and {QUOTED}")
    said = scrub_received(echo)
    assert not any(leak in said for leak in LEAKS), said
    assert "Basic <server_url password (Basic)>" in said


def test_lychee_fd_error_and_text_events_lose_the_basic_form_and_escapes():
    session = LycheeSession(lychee_fd.factory(server_url=url("http", 7860), verify="false"))
    [err] = session._translate("error", json.dumps(
        {"error": f"unauthorised: the request said Authorization: Basic {BASIC}"}))
    assert isinstance(err, Error) and BASIC not in err.message, err
    escaped = "".join(f"\\u{ord(c):04x}" for c in PASSWORD)
    [delta] = session._translate("assistant_text", '{"delta": "echo %s"}' % escaped)
    assert isinstance(delta, TranscriptDelta) and PASSWORD not in delta.text, delta


def test_a_bearer_key_written_with_json_escapes_is_masked_after_parsing(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "sk-escaped-0123456789")
    raw = '{"error": "Bearer \\u0073k-escaped-0123456789"}'
    assert "sk-escaped" not in json.dumps(received_json(raw))
