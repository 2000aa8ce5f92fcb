"""A protocol-faithful fake of the two OpenAI endpoints the judges use, on 127.0.0.1.

    POST /v1/chat/completions     JSON; text and ``input_audio`` content parts;
                                  ``response_format`` json_schema (strict) or json_object
    POST /v1/audio/transcriptions multipart/form-data; verbose_json with word timestamps

It checks requests the way the real service does where that matters to us (bearer key, model,
messages, content parts, base64 audio, schema shape, multipart fields) and answers 400/401
otherwise, in the service's error shape. Behaviour is scripted per request, in order:

    server.script(Reply("NO", "off topic"), Fail(429, retry_after=0.05), Hang(5), ...)

and, when the script is empty, ``server.responder(request)`` decides (default: an answer that
satisfies the requested JSON schema: the first enum value of every enum field). Every request
is recorded (``server.requests``) so tests can assert exact prompts and request counts.

Use it through the ``openai_server`` fixture (``from tests.fakes import openai_server`` in a
conftest).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import sys
import threading
import time
import wave
from collections import deque
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

from tests.support.servers import threaded

# --- what a scripted request does ---------------------------------------------------------


@dataclass
class Reply:
    """A chat answer ``{"answer": ..., "reason": ...}``."""

    answer: str = "YES"
    reason: str = "fake judge reason"


@dataclass
class JsonReply:
    """A chat answer whose message content is this object, serialised."""

    obj: Any


@dataclass
class Content:
    """A chat answer whose message content is this raw text (e.g. malformed JSON)."""

    text: str | None


@dataclass
class Refusal:
    text: str = "I can't help with that."


@dataclass
class Fail:
    """An HTTP error in the service's error shape; 429 may carry Retry-After (seconds)."""

    status: int
    retry_after: float | None = None
    message: str = "scripted failure"


@dataclass
class Hang:
    """Hold the request ``seconds`` (past the client's timeout), then answer ``then``."""

    seconds: float
    then: Any = None


@dataclass
class Disconnect:
    """Close the connection without any response."""


@dataclass
class Raw:
    """Answer ``status`` with this exact body and content type (an HTML error page from a
    proxy, a JSON body cut short): what a broken gateway sends."""

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200


@dataclass
class Drip:
    """Send the headers of a valid answer, then its body one byte every ``interval`` seconds
    (a stalled stream that never trips a per-read timeout)."""

    interval: float = 1.0


@dataclass
class Transcript:
    """A verbose_json transcription: ``words`` are (text, start, end)."""

    words: list[tuple[str, float, float]] = field(default_factory=list)
    language: str = "english"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    json: Any = None  # chat: the parsed body
    form: dict[str, Any] = field(default_factory=dict)  # transcription: multipart fields
    files: dict[str, bytes] = field(default_factory=dict)
    status: int | None = None  # what the server answered

    @property
    def endpoint(self) -> str:
        return self.path.rsplit("/v1/", 1)[-1]


# --- request checks ------------------------------------------------------------------------

class _BadRequest(Exception):
    def __init__(self, status: int, message: str, param: str | None = None,
                 type_: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.type = status, message, param, type_


_ROLES = {"system", "developer", "user", "assistant", "tool"}
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_chat(body: Any) -> None:
    if not isinstance(body, dict):
        raise _BadRequest(400, "body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _BadRequest(400, "you must provide a model parameter", "model")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _BadRequest(400, "'messages' must be a non-empty array", "messages")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise _BadRequest(400, f"invalid role in messages[{i}]", f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise _BadRequest(400, f"messages[{i}].content must be a string or an array",
                              f"messages[{i}].content")
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    raise _BadRequest(400, "text part without text", where)
            elif kind == "input_audio":
                audio = part.get("input_audio") or {}
                if audio.get("format") not in ("wav", "mp3"):
                    raise _BadRequest(400, "input_audio.format must be wav or mp3", where)
                try:
                    base64.b64decode(audio.get("data", ""), validate=True)
                except (binascii.Error, TypeError):
                    raise _BadRequest(400, "input_audio.data is not valid base64", where) \
                        from None
            else:
                raise _BadRequest(400, f"unsupported content part type {kind!r}", where)
    fmt = body.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_schema":
            js = fmt.get("json_schema")
            if not isinstance(js, dict) or not _SCHEMA_NAME.match(str(js.get("name", ""))) \
                    or not isinstance(js.get("schema"), dict):
                raise _BadRequest(400, "json_schema needs a valid name and a schema object",
                                  "response_format")
            schema = js["schema"]
            if js.get("strict") and (schema.get("additionalProperties") is not False or
                                     set(schema.get("required", [])) !=
                                     set(schema.get("properties", {}))):
                raise _BadRequest(400, "strict schemas need additionalProperties false and "
                                  "every property required", "response_format")
        elif kind not in ("text", "json_object"):
            raise _BadRequest(400, f"invalid response_format type {kind!r}", "response_format")


def _parse_multipart(content_type: str, body: bytes) -> tuple[dict, dict]:
    msg = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    if not msg.is_multipart():
        raise _BadRequest(400, "expected multipart/form-data")
    form: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = payload
        elif name in form:  # repeated field (arrays are sent as name[] repeated)
            form[name] = [*form[name], payload.decode()] if isinstance(form[name], list) \
                else [form[name], payload.decode()]
        else:
            form[name] = payload.decode()
    return form, files


def _wav_duration(data: bytes) -> float:
    try:
        with wave.open(io.BytesIO(data)) as w:
            return w.getnframes() / w.getframerate()
    except (wave.Error, EOFError):
        raise _BadRequest(400, "Invalid file format: the audio could not be decoded",
                          "file") from None


def _check_transcription(form: dict, files: dict) -> float:
    if "file" not in files:
        raise _BadRequest(400, "you must provide a file", "file")
    if not form.get("model"):
        raise _BadRequest(400, "you must provide a model parameter", "model")
    grans = form.get("timestamp_granularities[]")
    if grans is not None and form.get("response_format") != "verbose_json":
        raise _BadRequest(400, "timestamp_granularities requires response_format verbose_json",
                          "timestamp_granularities")
    duration = _wav_duration(files["file"])
    if duration < 0.1:
        raise _BadRequest(400, "Audio file is too short. Minimum audio length is 0.1 seconds.",
                          "file", "audio_too_short")
    return duration


# --- default answers -----------------------------------------------------------------------

def schema_default(request: Recorded) -> Any:
    """An answer satisfying the request's JSON schema: first enum value, else a stock
    string; a plain YES/NO reply when no schema was asked for."""
    fmt = (request.json or {}).get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    if not schema:
        return Reply()
    return JsonReply({k: spec["enum"][0] if "enum" in spec else "fake reason"
                      for k, spec in schema.get("properties", {}).items()})


# --- the server ----------------------------------------------------------------------------

class _QuietServer(ThreadingHTTPServer):
    """A client that gives up on a hanging or dripping answer (what the deadline tests do)
    resets its connection: expected here, so not printed as a server traceback."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """``usage=False`` answers chat requests without a ``usage`` object, as some local
    OpenAI-compatible servers and proxies do."""

    def __init__(self, usage: bool = True):
        self.usage = usage
        self.requests: list[Recorded] = []
        self.responder: Callable[[Recorded], Any] = schema_default
        self._script: deque = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._served = threaded(self._httpd, poll_s=0.02)  # short poll: fast shutdown

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *actions) -> "FakeOpenAI":
        with self._lock:
            self._script.extend(actions)
        return self

    @property
    def count(self) -> int:
        return len(self.requests)

    def of(self, endpoint: str) -> list[Recorded]:
        return [r for r in self.requests if r.endpoint == endpoint]

    @property
    def chat_requests(self) -> list[Recorded]:
        return self.of("chat/completions")

    @property
    def transcription_requests(self) -> list[Recorded]:
        return self.of("audio/transcriptions")

    def start(self) -> "FakeOpenAI":
        self._served.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases hanging handlers
        self._served.stop()

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _next_action(self, rec: Recorded) -> Any:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self.responder(rec)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                rec = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()})
                with server._lock:
                    server.requests.append(rec)
                try:
                    self._route(rec, body)
                except _BadRequest as e:
                    self._error(rec, e.status, e.message, e.param, e.type)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def _route(self, rec: Recorded, body: bytes):
                auth = rec.headers.get("authorization", "")
                if not auth.startswith("Bearer ") or not auth[7:].strip():
                    raise _BadRequest(401, "You didn't provide an API key.", None,
                                      "invalid_request_error")
                if self.path == "/v1/chat/completions":
                    try:
                        rec.json = json.loads(body)
                    except json.JSONDecodeError:
                        raise _BadRequest(400, "We could not parse the JSON body") from None
                    _check_chat(rec.json)
                    self._act(rec, server._next_action(rec), chat=True)
                elif self.path == "/v1/audio/transcriptions":
                    rec.form, rec.files = _parse_multipart(
                        self.headers.get("content-type", ""), body)
                    duration = _check_transcription(rec.form, rec.files)
                    action = server._next_action(rec)
                    if isinstance(action, (Reply, JsonReply)):  # default for chat only
                        action = Transcript()
                    self._act(rec, action, chat=False, duration=duration)
                else:
                    raise _BadRequest(404, f"Invalid URL (POST {self.path})")

            def _act(self, rec, action, chat: bool, duration: float = 0.0):
                while isinstance(action, Hang):
                    server._stop.wait(action.seconds)
                    action = action.then if action.then is not None else (
                        server.responder(rec) if chat else Transcript())
                if isinstance(action, Disconnect):
                    rec.status = 0
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(action, Raw):
                    rec.status = action.status
                    self.send_response(action.status)
                    self.send_header("content-type", action.content_type)
                    self.send_header("content-length", str(len(action.body)))
                    self.end_headers()
                    self.wfile.write(action.body)
                    return
                if isinstance(action, Drip):
                    body = json.dumps(_chat_body(rec.json["model"], Reply(), server.usage)
                                      if chat else
                                      _transcription_body(Transcript(), duration)).encode()
                    rec.status = 200
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.flush()
                    for i in range(len(body)):
                        if server._stop.wait(action.interval):
                            return
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                    return
                if isinstance(action, Fail):
                    headers = {}
                    if action.retry_after is not None:
                        headers["retry-after"] = f"{action.retry_after:g}"
                    kind = "rate_limit_exceeded" if action.status == 429 else "server_error"
                    self._error(rec, action.status, action.message, None, kind, headers)
                    return
                if chat:
                    self._send(rec, 200, _chat_body(rec.json["model"], action, server.usage))
                else:
                    self._send(rec, 200, _transcription_body(action, duration))

            def _error(self, rec, status, message, param, type_, headers=None):
                self._send(rec, status, {"error": {"message": message, "type": type_,
                                                   "param": param, "code": None}}, headers)

            def _send(self, rec, status, obj, headers=None):
                data = json.dumps(obj).encode()
                rec.status = status
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", f"req_fake_{len(server.requests)}")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _chat_body(model: str, action: Any, usage: bool = True) -> dict:
    content, refusal = None, None
    if isinstance(action, Reply):
        content = json.dumps({"answer": action.answer, "reason": action.reason})
    elif isinstance(action, JsonReply):
        content = json.dumps(action.obj)
    elif isinstance(action, Content):
        content = action.text
    elif isinstance(action, Refusal):
        refusal = action.text
    else:
        raise TypeError(f"not a chat action: {action!r}")
    body = {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}", "object": "chat.completion",
        "created": int(time.time()), "model": model, "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content,
                                 "refusal": refusal}}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return body


def _transcription_body(action: Any, duration: float) -> dict:
    if not isinstance(action, Transcript):
        raise TypeError(f"not a transcription action: {action!r}")
    words = [{"word": w, "start": s, "end": e} for w, s, e in action.words]
    return {"task": "transcribe", "language": action.language, "duration": duration,
            "text": " ".join(w for w, _, _ in action.words), "words": words,
            "usage": {"type": "duration", "seconds": round(duration)}}


@pytest.fixture
def openai_server():
    """A running FakeOpenAI; ``openai_server.url`` is the base URL for the SDK client."""
    with FakeOpenAI() as server:
        yield server
