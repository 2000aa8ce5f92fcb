"""How a failed HTTP request to a model's server is classed (models/util/http_server.py
``request_error``): a connection the server drops is transient (the trial is retried), whether
httpx2 raised it or, while a streamed body was being read, its transport's own exception."""

from __future__ import annotations

import httpcore2
import httpx2
import pytest

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.models.util.http_server import request_error

URL = "http://user:secret-pw@127.0.0.1:9/"


@pytest.mark.parametrize("exc", [
    httpx2.RemoteProtocolError("peer closed connection without sending complete message body"),
    httpcore2.RemoteProtocolError("peer closed connection without sending complete message body"),
    httpcore2.ReadError("connection reset"),
    ConnectionResetError(104, "Connection reset by peer"),
])
def test_a_dropped_connection_is_transient_and_shows_no_password(exc):
    err = request_error(exc, "lychee-fd", "the event stream", URL)
    assert isinstance(err, TransientModelError)
    assert "the event stream" in str(err) and "secret-pw" not in str(err)


def test_an_error_of_ours_is_not_transient():
    err = request_error(httpcore2.LocalProtocolError("bad request line"), "lychee-fd",
                        "the event stream", URL)
    assert isinstance(err, ModelError) and not isinstance(err, TransientModelError)
