"""How every remote request is made: cache first, then bounded retries, counted.

Shared by the text judge, the audio judge, the LLM simulator and the whisper-1 transcriber so
they fail the same way (docs/judges.md, "Failure semantics"). The SDK's own retries are off
(``max_retries=0``): every attempt counted here is one HTTP request.

Retried: timeouts, connection errors, HTTP 429 and 5xx, and answers that arrive but are not
usable (not JSON, an HTML error page, truncated JSON, or outside the schema). Not retried: other
4xx (bad key, unknown model, rejected request), which a retry cannot fix. When attempts run out
the request *fails* (``RequestFailed``); callers turn that into a judge error, never into a YES
or a NO.

Deadlines are totals, not per read: each HTTP attempt runs in a worker thread and is abandoned
(its connection closed) at ``RetryPolicy.timeout``, so a server that drips one byte a second
cannot hold a run; and a logical request gives up once ``RetryPolicy.deadline`` has passed.

The API key lives only inside the SDK client and a ``Secret`` holder whose repr hides it, so
no frame that pytest may print (``--showlocals``, ``--tb=long``) or store (JUnit XML) shows it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    import openai

from .cache import RequestCache, request_key
from .netsafety import Secret, insecure_url_problem
from .retry import RetryPolicy  # also read as calls.RetryPolicy, judges.RetryPolicy

T = TypeVar("T")

ENV_API_KEY = "OPENAI_API_KEY"
# a judge's or a service's model given as one of these is turned off, not a model's name
OFF = ("off", "none")


def turned_off(model: str | None) -> bool:
    """``--duplexact-judge=off`` (or ``none``): that service is not wanted, so it needs no
    key, is not built and bills nothing (judges/panel.py, spend/estimate.py, preflight)."""
    return bool(model) and str(model).strip().lower() in OFF


class InvalidAnswer(ValueError):
    """The server answered, but not in the form asked for (retried, then an error)."""


class RequestFailed(RuntimeError):
    """No usable answer after the allowed attempts, or a request a retry cannot fix."""


class ServiceUnreachable(RequestFailed):
    """Every attempt failed to connect at all (refused, no route, DNS): nothing answered at
    the service's address, so every later request will fail the same way (the run stops
    after a few in a row: pytest_plugin/session.py, LOST_AFTER)."""


class ConfigError(ValueError):
    """A judge/transcriber cannot be built as configured (e.g. no API key)."""


MAX_REASON_CHARS = 1000  # a judge's reason as stored and shown; the cache keeps it whole


def capped(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """A judge's free text bounded for outcomes, reports and the terminal (a runaway judge
    once stored 2 MB per instance everywhere); the request cache keeps the full answer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters in the request cache]"


DEFAULT_DEADLINE = 150.0  # a question, retries and waits included (--duplexact-judge-timeout)
MAX_ATTEMPT_S = 60.0  # one HTTP attempt never gets more, whatever the question's deadline


def policy_for(deadline: float | None = None, max_attempts: int | None = None) -> RetryPolicy:
    """The default policy with a question deadline (--duplexact-judge-timeout)."""
    kw: dict[str, Any] = {}
    if deadline is not None:
        kw.update(deadline=deadline, timeout=min(MAX_ATTEMPT_S, deadline))
    if max_attempts is not None:
        kw["max_attempts"] = max_attempts
    return RetryPolicy(**{"deadline": DEFAULT_DEADLINE, **kw})


DEFAULT_POLICY = policy_for()

@dataclass
class Counters:
    """Cost and health of one remote service, for the report.

    ``calls``: HTTP requests sent (every attempt, each one billed); ``requests``: logical
    requests asked of this client; ``cache_hits``: answered from the cache without a call;
    ``errors``: logical requests that ended without a usable answer; ``retries``: extra
    attempts; ``invalid_answers``: answers that arrived but were unusable. ``billed``: what
    the service reported it billed for the calls made (``input_tokens``, ``output_tokens``,
    ``audio_s``), unusable answers included, cache hits not (spend/cost.py prices it)."""

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    invalid_answers: int = 0
    billed: dict = field(default_factory=dict)

    def bill(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for k, v in usage.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.billed[k] = round(self.billed.get(k, 0) + v, 6)

    def as_dict(self) -> dict[str, int | float]:
        out = {k: v for k, v in self.__dict__.items() if k != "billed"}
        return {**out, **self.billed}


def token_usage(usage: Any) -> dict:
    """A chat completion's ``usage`` as the payload key the counters bill from."""
    if usage is None:
        return {}
    got = {"input_tokens": getattr(usage, "prompt_tokens", None),
           "output_tokens": getattr(usage, "completion_tokens", None)}
    got = {k: v for k, v in got.items() if isinstance(v, int) and not isinstance(v, bool)}
    return {"usage": got} if got else {}


@dataclass
class Outcome:
    value: Any
    cached: bool
    key: str | None = None
    attempts: int = 0
    notes: list[str] = field(default_factory=list)


def resolve_api_key(api_key: str | Secret | None) -> Secret:
    if isinstance(api_key, Secret):
        return api_key
    key = api_key or os.environ.get(ENV_API_KEY)
    if not key:
        raise ConfigError(f"no API key: set the {ENV_API_KEY} environment variable")
    return Secret(key)


def _sdk():
    """The openai package, imported on first use: it brings httpx and aiohttp (0.6 s of every
    pytest start), which a run with no judge, transcriber or simulator over HTTP never uses."""
    import openai

    return openai


def make_openai(base_url: str | None, api_key: Secret, timeout: float) -> openai.OpenAI:
    """The real SDK client, with its own retries off so that retries are counted here."""
    return _sdk().OpenAI(api_key=api_key.reveal(), base_url=base_url or None,
                         timeout=timeout, max_retries=0)


OPENAI_BASE_URL = "https://api.openai.com/v1"  # where the SDK goes when nothing says otherwise
ENV_SDK_BASE_URL = "OPENAI_BASE_URL"  # the SDK's own fallback, read when base_url is None
OPENAI_HOSTS = ("api.openai.com",)
ENDPOINT_KINDS = ("openai", "self-hosted")


def effective_base_url(base_url: str | None) -> str:
    """Where the SDK really sends a client's requests: its base URL, else the SDK's
    OPENAI_BASE_URL environment variable, else OpenAI's API. Credentials and query dropped
    (it goes into reports)."""
    from urllib.parse import urlsplit, urlunsplit

    url = base_url or os.environ.get(ENV_SDK_BASE_URL) or OPENAI_BASE_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def endpoint_kind(base_url: str | None) -> str:
    """``openai`` for OpenAI's own API, ``self-hosted`` for any other OpenAI-compatible
    server (vLLM, llama.cpp, Ollama, a proxy): there, a model name does not make it the
    paper's judge."""
    from urllib.parse import urlsplit

    host = (urlsplit(effective_base_url(base_url)).hostname or "").lower()
    return "openai" if host in OPENAI_HOSTS else "self-hosted"


class Remote:
    """The SDK client of one remote service, built on first use (most runs never need some
    of the judges) and rebuilt after an attempt was abandoned at its deadline (closing the
    client is what frees the abandoned thread's socket). ``client`` injects a ready SDK
    client (tests): it is never closed or rebuilt."""

    def __init__(self, base_url: str | None, api_key: str | Secret | None, timeout: float,
                 client: Any = None):
        problem = insecure_url_problem(base_url, "base URL")
        if problem:
            raise ConfigError(problem)
        self.base_url = base_url
        self._timeout = timeout
        self.secret = None if client is not None else resolve_api_key(api_key)
        self._sdk = client
        self._injected = client is not None

    def __repr__(self) -> str:
        return f"Remote(base_url={self.base_url!r})"

    @property
    def endpoint(self) -> str:
        """``openai`` or ``self-hosted`` (endpoint_kind), for the report."""
        return endpoint_kind(self.base_url)

    @property
    def endpoint_url(self) -> str:
        return effective_base_url(self.base_url)

    def client(self) -> Any:
        if self._sdk is None:
            self._sdk = make_openai(self.base_url, self.secret, self._timeout)
        return self._sdk

    def abandon(self) -> None:
        """An attempt overran its deadline: close its connection, start afresh next time."""
        if self._injected or self._sdk is None:
            return
        sdk, self._sdk = self._sdk, None
        try:
            sdk.close()
        except Exception:  # closing a client under a blocked reader may complain; it is gone
            pass


_SECRETISH = re.compile(r"\b(sk-[A-Za-z0-9_*\-]{4,}|Bearer\s+\S+)")


def redact(text: str, secret: Secret | None = None) -> str:
    """Strip anything key-like from text that may end up in a report (a 401 body echoes a
    masked key, for instance)."""
    if secret is not None and secret.reveal():
        text = text.replace(secret.reveal(), "[redacted]")
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


def describe(exc: BaseException, secret: Secret | None = None) -> str:
    openai = _sdk()
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error ({type(exc.__cause__ or exc).__name__})"
    if isinstance(exc, openai.APIStatusError):
        msg = exc.message if isinstance(exc.message, str) else ""
        return redact(f"HTTP {exc.status_code}: {msg[:200]}", secret)
    return redact(f"{type(exc).__name__}: {str(exc)[:200]}", secret)


def _retryable(exc: BaseException) -> bool:
    openai = _sdk()
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


class AttemptTimedOut(Exception):
    """An HTTP attempt overran ``RetryPolicy.timeout`` (total, however the bytes trickled)."""


def _within(seconds: float, send: Callable[[], Any], abandon: Callable[[], None] | None):
    """``send()`` with a total deadline: it runs in a daemon thread; past ``seconds`` the
    attempt is abandoned (``abandon`` closes its connection) and AttemptTimedOut raised."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = send()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=work, name="duplexact-remote-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if abandon is not None:
            abandon()
        raise AttemptTimedOut(f"no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def perform(*, request: dict, send: Callable[[], Any], parse: Callable[[Any], T],
            cache: RequestCache | None, policy: RetryPolicy, counters: Counters,
            sleep: Callable[[float], None] = time.sleep, secret: Secret | None = None,
            abandon: Callable[[], None] | None = None,
            clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Answer ``request``: from the cache, else by ``send()`` (one HTTP request returning a
    JSON-able payload) parsed by ``parse`` (raises InvalidAnswer when unusable).

    Each attempt is bounded by ``policy.timeout`` in total (``abandon`` is called when one is
    given up); the whole request by ``policy.deadline``. Only payloads that parse are cached.
    Raises RequestFailed with a report-safe reason."""
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
    made = 0  # HTTP attempts sent for this request
    unconnected = 0  # of them, the ones that reached nothing (not a timeout, not an answer)
    openai = _sdk()  # a request is about to go out through it (imported before the
    # deadline's clock starts: a first import is not the service's time)
    end = None if policy.deadline is None else clock() + policy.deadline
    for attempt in range(1, policy.max_attempts + 1):
        left = policy.timeout if end is None else min(policy.timeout, end - clock())
        if left <= 0:
            notes.append(f"deadline of {policy.deadline:g} s reached")
            break
        counters.calls += 1
        made = attempt
        retry_after = None
        try:
            payload = _within(left, send, abandon)
            if isinstance(payload, dict):  # billed even when the answer proves unusable
                counters.bill(payload.get("usage"))
        except AttemptTimedOut as exc:
            notes.append(f"request timed out ({exc})")
        except openai.OpenAIError as exc:
            if isinstance(exc, openai.APIResponseValidationError):  # e.g. an HTML body
                counters.invalid_answers += 1
                notes.append(redact(f"unusable answer: {describe(exc)}", secret))
                retry_after = 0.0
            else:
                notes.append(describe(exc, secret))
                if isinstance(exc, openai.APIConnectionError) and \
                        not isinstance(exc, openai.APITimeoutError):
                    unconnected += 1
                if not _retryable(exc):
                    counters.errors += 1
                    raise RequestFailed(f"{notes[-1]} (not retried)") from None
                if isinstance(exc, openai.APIStatusError):
                    retry_after = _retry_after(exc)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a truncated JSON body
            counters.invalid_answers += 1
            notes.append(f"unusable answer: body is not valid JSON ({type(exc).__name__})")
            retry_after = 0.0
        except InvalidAnswer as exc:  # raised by send() on a body of the wrong shape
            counters.invalid_answers += 1
            notes.append(redact(f"unusable answer: {exc}", secret))
            retry_after = 0.0
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
            wait = policy.delay(attempt, retry_after)
            if end is not None and clock() + wait >= end:
                notes.append(f"deadline of {policy.deadline:g} s reached")
                break
            counters.retries += 1
            sleep(wait)
    counters.errors += 1
    failed = ServiceUnreachable if made and unconnected == made else RequestFailed
    last = notes[-1]
    if len(notes) > 1 and last.startswith("deadline of "):  # what the last attempt met, too
        last = f"{notes[-2]}, then the {last}"
    raise failed(f"no usable answer after {made} attempt(s); last: {last}")
