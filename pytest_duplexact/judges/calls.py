"""How every remote request is made: cache first, then bounded retries, counted.

Shared by the text judge, the audio judge, the LLM simulator and the whisper-1 transcriber so
they fail the same way (docs/judges.md, "Failure semantics"). The SDK's own retries are off
(``max_retries=0``): every attempt counted here is one HTTP request.

Retried: timeouts, connection errors, HTTP 429 and 5xx, and answers that arrive but are not
usable (not JSON, or outside the schema). Not retried: other 4xx (bad key, unknown model,
rejected request), which a retry cannot fix. When attempts run out the request *fails*
(``RequestFailed``); callers turn that into a judge error, never into a YES or a NO.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Callable, TypeVar

import openai

from ..retry import RetryPolicy  # noqa: F401 (judges.RetryPolicy)
from .cache import RequestCache, request_key

T = TypeVar("T")

ENV_API_KEY = "OPENAI_API_KEY"


class InvalidAnswer(ValueError):
    """The server answered, but not in the form asked for (retried, then an error)."""


class RequestFailed(RuntimeError):
    """No usable answer after the allowed attempts, or a request a retry cannot fix."""


class ConfigError(ValueError):
    """A judge/transcriber cannot be built as configured (e.g. no API key)."""


@dataclass
class Counters:
    """Cost and health of one remote service, for the report.

    ``calls``: HTTP requests sent (every attempt, each one billed); ``requests``: logical
    requests asked of this client; ``cache_hits``: answered from the cache without a call;
    ``errors``: logical requests that ended without a usable answer; ``retries``: extra
    attempts; ``invalid_answers``: answers that arrived but were unusable."""

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    invalid_answers: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Outcome:
    value: Any
    cached: bool
    key: str | None = None
    attempts: int = 0
    notes: list[str] = field(default_factory=list)


def resolve_api_key(api_key: str | None) -> str:
    key = api_key or os.environ.get(ENV_API_KEY)
    if not key:
        raise ConfigError(f"no API key: set the {ENV_API_KEY} environment variable")
    return key


def make_openai(base_url: str | None, api_key: str | None, timeout: float) -> openai.OpenAI:
    """The real SDK client, with its own retries off so that retries are counted here."""
    return openai.OpenAI(api_key=resolve_api_key(api_key), base_url=base_url or None,
                         timeout=timeout, max_retries=0)


_SECRETISH = re.compile(r"\b(sk-[A-Za-z0-9_*\-]{4,}|Bearer\s+\S+)")


def redact(text: str, secret: str | None = None) -> str:
    """Strip anything key-like from text that may end up in a report (a 401 body echoes a
    masked key, for instance)."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return _SECRETISH.sub("[redacted]", text)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:  # an HTTP date
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def describe(exc: BaseException, secret: str | None = None) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error ({type(exc.__cause__ or exc).__name__})"
    if isinstance(exc, openai.APIStatusError):
        msg = exc.message if isinstance(exc.message, str) else ""
        return redact(f"HTTP {exc.status_code}: {msg[:200]}", secret)
    return redact(f"{type(exc).__name__}: {str(exc)[:200]}", secret)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def perform(*, request: dict, send: Callable[[], Any], parse: Callable[[Any], T],
            cache: RequestCache | None, policy: RetryPolicy, counters: Counters,
            sleep: Callable[[float], None] = time.sleep, secret: str | None = None) -> Outcome:
    """Answer ``request``: from the cache, else by ``send()`` (one HTTP request returning a
    JSON-able payload) parsed by ``parse`` (raises InvalidAnswer when unusable).

    Only payloads that parse are cached. Raises RequestFailed with a report-safe reason."""
    counters.requests += 1
    key = request_key(request) if cache is not None else None
    if cache is not None:
        payload = cache.get(request)
        if payload is not None:
            try:
                value = parse(payload)
            except InvalidAnswer:
                cache.stats.corrupt += 1  # stored by an older, looser parser: refetch
            else:
                counters.cache_hits += 1
                return Outcome(value, cached=True, key=key)
    notes: list[str] = []
    for attempt in range(1, policy.max_attempts + 1):
        counters.calls += 1
        retry_after = None
        try:
            payload = send()
        except openai.OpenAIError as exc:
            notes.append(describe(exc, secret))
            if not _retryable(exc):
                counters.errors += 1
                raise RequestFailed(f"{notes[-1]} (not retried)") from None
            if isinstance(exc, openai.APIStatusError):
                retry_after = _retry_after(exc)
        else:
            try:
                value = parse(payload)
            except InvalidAnswer as exc:
                counters.invalid_answers += 1
                notes.append(redact(f"unusable answer: {exc}", secret))
                retry_after = 0.0  # the server is fine; ask again at once
            else:
                if cache is not None:
                    cache.put(request, payload)
                return Outcome(value, cached=False, key=key, attempts=attempt, notes=notes)
        if attempt < policy.max_attempts:
            counters.retries += 1
            sleep(policy.delay(attempt, retry_after))
    counters.errors += 1
    raise RequestFailed(f"no usable answer after {policy.max_attempts} attempt(s); last: "
                        f"{notes[-1]}")
