"""What the adapters for the open models' own HTTP servers share (lychee_fd.py, mini_omni2.py):
the client, and a failed request as the error that says what to do.

The client is ``httpx2``, the HTTP library the ``openai`` package (a core dependency) already
installs; it ships an SSE parser derived from httpx-sse, so no second HTTP stack is needed
(``httpx`` itself is not installed here, and httpx-sse imports it). Every request has a
deadline (``httpx2.Timeout``); certificates are verified unless the user passed
``verify=false`` (a demo server's self-signed certificate, docs/models.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import logging
import os
from typing import Any

# imported here, not lazily: a missing package fails the registry's preflight, by name
import httpcore2
import httpx2
import numpy as np

from ..contract import ModelError
from ..model_options import TRANSIENT_HTTP, ModelConfigError, scrub_url, shown_url
from ..streaming_contract import ServerUnreachable, TransientModelError

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0
# A whole answer the client reads (a JSON body, an error page): the servers' are under 1 KB;
# one the server never ends must not grow memory until the read deadline, which never comes.
MAX_ANSWER_BYTES = 1 << 20


def deadline(connect: float, read: float) -> httpx2.Timeout:
    """``connect`` s to connect, ``read`` s of silence between the bytes of an answer."""
    return httpx2.Timeout(read, connect=connect)


def client(*, verify: bool, connect_timeout: float, read_timeout: float) -> httpx2.AsyncClient:
    """One client per session: connection reuse for the many small requests of a trial."""
    return httpx2.AsyncClient(verify=verify, timeout=deadline(connect_timeout, read_timeout),
                              follow_redirects=False)


def _root_cause(e: BaseException) -> str:
    """`` ([Errno 111] Connection refused)``: the socket's own reason under an async client's
    "All connection attempts failed", which alone does not say whether anything listens."""
    seen = e.__cause__ or e.__context__
    for _ in range(6):
        if seen is None:
            return ""
        if isinstance(seen, OSError) and seen.errno:  # "Connect call failed": errno's words
            return f" ([Errno {seen.errno}] {os.strerror(seen.errno)})"
        seen = seen.__cause__ or seen.__context__
    return ""


def request_error(e: BaseException, label: str, what: str, url: str) -> ModelError:
    """A failed request (``what``: which one) as a ``ModelError``: timeouts, refused or reset
    connections and busy statuses are transient (retried); a certificate the client does not
    trust points at ``verify=false``; nothing of ``url``'s credentials is shown."""
    where = shown_url(url)
    if isinstance(e, httpx2.HTTPStatusError):
        status = e.response.status_code
        try:
            detail = scrub_url(e.response.text[:200], url).strip()
        except Exception:  # a streamed body not read: the status is enough
            detail = ""
        text = f"{label}: {what} got HTTP {status} from {where}" + (f": {detail}" if detail
                                                                     else "")
        return TransientModelError(text) if status in TRANSIENT_HTTP else ModelError(text)
    why = scrub_url(f"{type(e).__name__}: {e}{_root_cause(e)}", url)
    if "CERTIFICATE_VERIFY_FAILED" in why or "certificate verify failed" in why:
        return ModelConfigError(
            f"{label}: {what} to {where}: {why}. A demo server with a self-signed certificate "
            "needs the model option verify=false (only for a server you trust)")
    if isinstance(e, httpx2.TimeoutException):
        return TransientModelError(f"{label}: {what} to {where} hit its deadline ({why})")
    if isinstance(e, (httpx2.ConnectError, ConnectionRefusedError)):  # nothing listens
        return ServerUnreachable(f"{label}: {what} to {where} failed: {why}; is the model's "
                                 "server running there? docs/models.md shows how to start it")
    # httpx2 maps its transport's errors to its own, but one raised while a streamed body is
    # read (a server gone mid-event-stream) can reach us as httpcore2's own (seen under load)
    if isinstance(e, (httpx2.TransportError, httpcore2.NetworkError,
                      httpcore2.RemoteProtocolError, OSError)):
        return TransientModelError(f"{label}: {what} to {where} failed: {why}")
    return ModelError(f"{label}: {what} to {where} failed: {why}")


async def bounded(response: httpx2.Response, label: str, what: str, *,
                  max_bytes: int = MAX_ANSWER_BYTES, cut: bool = False) -> httpx2.Response:
    """A streamed ``response`` read whole, up to ``max_bytes``: past them a ``ModelError``
    naming the bound, or with ``cut`` (an error page: its start says enough) the first
    ``max_bytes``. The answer comes back as a plain response over what was read."""
    body = bytearray()
    async for data in response.aiter_bytes():
        body += data
        if len(body) > max_bytes:
            if cut:
                del body[max_bytes:]
                break
            raise ModelError(f"{label}: {what}: the answer passed {max_bytes} bytes (the bound "
                             "on an answer, MAX_ANSWER_BYTES in models/util/http_server.py)")
    return _plain(response, body)


def _plain(response: httpx2.Response, body: bytes | bytearray) -> httpx2.Response:
    """A read response as a plain one over ``body`` (already decoded: no content coding)."""
    keep = {k: v for k, v in response.headers.items() if k.lower() == "content-type"}
    return httpx2.Response(response.status_code, headers=keep, content=bytes(body),
                           request=response.request)


async def request(http: httpx2.AsyncClient, method: str, url: str, label: str, what: str,
                  **kwargs: Any) -> httpx2.Response:
    """``method url`` with its answer read by ``bounded`` (an error page cut, not refused)."""
    async with http.stream(method, url, **kwargs) as r:
        return await bounded(r, label, what, cut=r.status_code >= 400)


def scrubbed(text: Any, url: str) -> str:
    """Text from a server (an error, a transcript) minus ``url``'s credentials, and any URL's
    ``user:password@``: a proxy or a server that echoes them back; and through the one scrub
    of received text (every key and remembered secret, the Basic header's form included)."""
    from ...remote.netsafety import scrub_received

    return scrub_received(scrub_url(str(text), url))


def json_body(response: Any, label: str, what: str) -> dict:
    """A JSON object answer, or a ``ModelError`` naming the request."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ModelError(f"{label}: {what}: the server's answer is not a JSON object")
    return body


def wav_bytes(x: np.ndarray, rate: int = 16_000) -> bytes:
    """PCM-16 WAV, what the servers' web clients upload (Lychee-FD's ``wavBlobFromFloat32``,
    Mini-Omni2's pydub export)."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.clip(x, -1, 1), rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


async def shut_down(http: httpx2.AsyncClient, tasks: list, label: str) -> None:
    """End a session's background ``tasks`` (cancelled, awaited) and its client, each within
    a deadline: a dead server must not hold the instance."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except BaseException:  # its own failure was reported already, or it was cancelled
            pass
    try:
        await asyncio.wait_for(http.aclose(), CLOSE_TIMEOUT_S)
    except Exception as e:
        log.debug("%s: closing the client failed: %s", label, type(e).__name__)


# how long `duplexact models NAME -o server_url=...` waits for a server before saying no
REACH_TIMEOUT_S = 10.0
PROBE_BYTES = 64 * 1024  # of a probe's answer: a status page, an engine.io handshake


def probe(label: str, url: str, path: str, *, verify: bool,
          timeout: float = REACH_TIMEOUT_S) -> httpx2.Response:
    """One ``GET url + path`` within ``timeout`` seconds overall, for ``duplexact models NAME
    -o server_url=...`` and the run's preflight: the answer (its first ``PROBE_BYTES``: a body
    that does not end would hold the command), or the ``ModelError`` that says why nothing
    answered. The deadline is on the whole exchange, not on each read: a server that trickles
    a byte now and then cannot hold it. A GET creates no session on any of these servers
    (their session routes take POST). Runs on an event loop of its own (in a thread), so it
    may be called from a thread whose loop is running."""

    async def get() -> httpx2.Response:
        async with httpx2.AsyncClient(verify=verify, timeout=deadline(min(timeout, 5.0), timeout),
                                      follow_redirects=False) as c, \
                c.stream("GET", url.rstrip("/") + path) as r:
            body = bytearray()
            async for data in r.aiter_bytes():
                body += data
                if len(body) >= PROBE_BYTES:
                    break
            return _plain(r, body[:PROBE_BYTES])

    async def bounded_get() -> httpx2.Response:
        try:
            return await asyncio.wait_for(get(), timeout)
        except asyncio.TimeoutError:
            raise httpx2.ReadTimeout(f"no whole answer within {timeout:g} s") from None

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="duplexact-probe") as pool:
        try:
            return pool.submit(asyncio.run, bounded_get()).result()
        except httpx2.HTTPError as e:
            err = request_error(e, label, f"GET {path}", url)
    raise err


def reach_route(label: str, url: str, path: str, *, verify: bool) -> str:
    """``path`` takes POST on the model's server, so a GET there is answered 405 (Method Not
    Allowed) by that server; 404, or any other answer, comes from something else listening at
    the address (another model's server, a WebSocket server's 426)."""
    r = probe(label, url, path, verify=verify)
    if r.status_code == 404:
        raise ModelError(f"{label}: an HTTP server answers at {shown_url(url)} but has no "
                         f"{path} route: is it the model's own server?")
    if r.status_code in (401, 403, 407):
        raise ModelConfigError(f"{label}: {shown_url(url)} refused the request (HTTP "
                               f"{r.status_code}): does it need credentials in server_url?")
    if r.status_code != 405:  # anything else listening there (a WebSocket server: 426)
        raise ModelError(f"{label}: {shown_url(url)} answered HTTP {r.status_code} on GET "
                         f"{path}, where the model's server answers 405 (the route takes "
                         f"POST): it does not speak {label}'s protocol; is it the model's "
                         "own server?")
    return f"HTTP {r.status_code} on GET {path} at {shown_url(url)} (the route is there)"

