"""Never send an API key in clear to another machine.

A base URL (judges, transcriber, simulator, realtime models) that is plain ``http://`` or
``ws://`` and names a host other than this machine would carry the key unencrypted across the
network. That is refused unless the user opts in with ``DUPLEXACT_ALLOW_INSECURE_HTTP=1``
(e.g. a judge server inside a trusted private network). Loopback is always allowed: it never
leaves the machine. It is decided by address (127.0.0.0/8, ::1) and the one name the resolver
answers from its hosts file, ``localhost``; any other name (``*.localhost`` included, which a
resolver may send to DNS) counts as another machine. The decision is made on the URL alone,
before any connection. ``Secret`` holds a key masked, so no traceback, log line or report that
mentions the holder can show it; ``scrub_received`` is the one scrub of every text a server
sent (an error, a close reason, a model's words) before it is kept anywhere, and
``ReceivedText`` applies it to text streamed in pieces, so a key split across them is masked
too; ``received_json`` parses a server's JSON message and scrubs what parsing produced (a key
written with JSON escapes passes a scrub of the raw text and comes back on parsing).
``remember_secret`` adds a configured key or password to what every scrub masks, and
``remember_url_credentials`` a URL's password in every form the client sends it (as written,
decoded, and the ``Basic`` header's base64 of ``user:password``).
"""

from __future__ import annotations

import base64
import collections.abc
import ipaddress
import json
import logging
import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

ENV_ALLOW = "DUPLEXACT_ALLOW_INSECURE_HTTP"
_CLEAR = ("http", "ws")


def _loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":  # /etc/hosts; other names may go to DNS
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str | None) -> bool:
    """``url`` names this machine (127.0.0.0/8, ::1, localhost): a server of the user's own,
    which no provider bills (spend/estimate.py)."""
    if not url:
        return False
    try:
        return _loopback(urlsplit(url).hostname or "")
    except ValueError:  # a malformed URL: refused elsewhere, not ours to call local
        return False


def insecure_url_problem(url: str | None, what: str, env: dict | None = None) -> str | None:
    """Why ``url`` may not carry a key (None when it may)."""
    if not url:
        return None
    env = os.environ if env is None else env
    parts = urlsplit(url)
    if parts.scheme.lower() not in _CLEAR:
        return None
    host = parts.hostname or ""
    if _loopback(host) or env.get(ENV_ALLOW, "").strip().lower() in ("1", "true", "yes"):
        return None
    return (f"{what} {url} is plain {parts.scheme}:// to {host or 'an unnamed host'}, which "
            f"would send the API key unencrypted; use https:// (wss://), or set {ENV_ALLOW}=1 "
            "if that network is trusted")


class Secret:
    """An API key that never shows: its repr and str are masked, so a traceback's locals, a
    log line or a report that mentions the holder cannot carry the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def reveal(self) -> str:
        return self._value


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def mask_credentials(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@``: what may
    be written to a report, a journal or a log (a server URL may carry a proxy's password)."""
    if "://" not in text:  # the pattern's anchor: skips a scan of ~40 ns a character
        return text
    return _USERINFO.sub("***@", text)


class MaskedRepr(str):
    """A string whose ``repr`` (what ``pytest -l`` shows for locals, and containers print) has
    its URL credentials masked; its value is unchanged, for the library that needs it."""

    def __repr__(self) -> str:
        return repr(mask_credentials(str(self)))


def masked_repr(value: str) -> str:
    """``value``, as a ``MaskedRepr`` when it carries URL credentials."""
    return MaskedRepr(value) if mask_credentials(value) != value else value


class BearerHeaders(collections.abc.Mapping):
    """``{"Authorization": "Bearer <key>"}`` for a client that takes a headers mapping, with
    the key held in a ``Secret`` until the client reads the value: the mapping's repr is
    masked, so a frame local holding it shows no key."""

    def __init__(self, key: Secret):
        self._key = key

    def __getitem__(self, name: str) -> str:
        if name != "Authorization":
            raise KeyError(name)
        return f"Bearer {self._key.reveal()}"

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(("Authorization",))

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "{'Authorization': 'Bearer ********'}"


_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|_KEY)$")
_SECRET_HEADER = re.compile(r"(?i)(\bbearer\s+|\b(?:x-goog-api-key|api-key)\s*[:=]\s*)"
                            r"[^\s<\"',;]+")


# Keys and passwords the user configured under any name (a model's key variable, the password
# of a server_url): masked by ``mask_secrets`` like the environment's keys. In memory only.
_CONFIGURED: dict[str, str] = {}
MIN_SECRET = 6  # a shorter "secret" would mask ordinary words wherever they occur


def remember_secret(value: str | None, name: str) -> None:
    """``value`` (a configured key or password) is masked as ``<name>`` from now on by every
    scrub of this process, whatever variable or URL it came from."""
    if value and len(value) >= MIN_SECRET:
        _CONFIGURED[value] = name


def remember_url_credentials(url: str | None, name: str = "server_url password") -> None:
    """The password of ``url`` masked in every form the client itself sends or a server may
    echo: as written, percent-decoded, and inside the ``Authorization: Basic`` header an HTTP
    or WebSocket library builds from the URL (base64 of ``user:password``)."""
    parts = urlsplit(url or "")
    if not parts.password:
        return
    users = {parts.username or "", unquote(parts.username or "")}
    for password in {parts.password, unquote(parts.password)}:
        remember_secret(password, name)
        for user in users:
            basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            remember_secret(basic, f"{name} (Basic)")


def _secret_values(env: collections.abc.Mapping) -> list[tuple[str, str]]:
    """(value, name) of every key known, the longest first (a key inside a longer one)."""
    if env is os.environ:
        return _ENVIRONMENT.values()
    return _secrets_of(env)


def _secrets_of(env: collections.abc.Mapping) -> list[tuple[str, str]]:
    values = [(v, k) for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8]
    return sorted(values + list(_CONFIGURED.items()), key=lambda p: -len(p[0]))


class _EnvironmentSecrets:
    """``_secrets_of(os.environ)``, worked out again only when the environment or the
    configured secrets changed: every message a streaming session receives is scrubbed, and
    reading the environment variable by variable cost more than the scrub itself. The check
    compares whole copies (a C-level dict comparison), so any change at all is seen."""

    def __init__(self) -> None:
        self._env: dict | None = None
        self._configured: dict[str, str] = {}
        self._values: list[tuple[str, str]] = []

    def values(self) -> list[tuple[str, str]]:
        raw = getattr(os.environ, "_data", None)  # the bytes behind os.environ (CPython)
        if raw is None:
            return _secrets_of(os.environ)
        if raw != self._env or _CONFIGURED != self._configured:
            self._values = _secrets_of(os.environ)
            self._env, self._configured = dict(raw), dict(_CONFIGURED)
        return self._values


_ENVIRONMENT = _EnvironmentSecrets()


def mask_secrets(text: str, env: dict | None = None) -> str:
    """``text`` minus every key this process holds: the value of each environment variable
    named like a key (``*_API_KEY``, ``*TOKEN``, ``*SECRET``, ``*_KEY``), each secret given
    to ``remember_secret``, and whatever follows ``Bearer`` or an ``x-goog-api-key`` /
    ``api-key`` header name."""
    env = os.environ if env is None else env
    values = _secret_values(env)
    for value, name in values:
        if value in text:
            text = text.replace(value, f"<{name}>")
    lowered = text.lower()  # the header names first: the pattern costs ~50 ns a character
    if "bearer" not in lowered and "api-key" not in lowered:
        return text
    return _SECRET_HEADER.sub(r"\1<masked>", text)


def scrub_received(text: str | bytes, key_vars: tuple[str, ...] = (),
                   env: dict | None = None) -> str:
    """What a server sent (an ERROR or close reason, a provider's error event, a model's
    TEXT), fit to keep in a message, a file, an event or a local: decoded (bytes as UTF-8,
    bad bytes replaced), minus the values of ``key_vars`` (however short), every key
    ``mask_secrets`` knows and the ``user:password@`` of any URL in it. The one scrub for
    text from the network: call it where the text is received, before anything holds it."""
    env = os.environ if env is None else env
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    text = str(text)
    for var in key_vars:
        key = env.get(var)
        if key and key in text:
            text = text.replace(key, f"<{var}>")
    return mask_credentials(mask_secrets(text, env))


def scrub_parsed(value: Any, key_vars: tuple[str, ...] = ()) -> Any:
    """``value`` (a parsed JSON message: dicts, lists, strings, numbers) with every string in
    it, keys included, through ``scrub_received``; containers are rewritten in place, without
    recursion (a hostile message may nest deep). Text without a secret is left as it is."""
    if isinstance(value, str):
        return scrub_received(value, key_vars)
    strings: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        children = node.items() if isinstance(node, dict) else \
            enumerate(node) if isinstance(node, list) else ()
        for k, v in children:
            if isinstance(k, str):
                strings.append(k)
            if isinstance(v, str):
                strings.append(v)
            elif isinstance(v, (dict, list)):
                stack.append(v)
    joined = "\n".join(strings)  # \n ends every pattern: one scan finds whether any matches
    if scrub_received(joined, key_vars) == joined:
        return value
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            items = list(node.items())
            node.clear()
            for k, v in items:
                node[scrub_received(k, key_vars) if isinstance(k, str) else k] = \
                    _scrub_item(v, key_vars, stack)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                node[i] = _scrub_item(v, key_vars, stack)
    return value


def _scrub_item(v: Any, key_vars: tuple[str, ...], stack: list) -> Any:
    if isinstance(v, str):
        return scrub_received(v, key_vars)
    if isinstance(v, (dict, list)):
        stack.append(v)
    return v


class NotJSON(ValueError):
    """A server's message that is not the JSON text its protocol sends (says why, briefly)."""


def received_json(raw: str | bytes, key_vars: tuple[str, ...] = (), *,
                  binary: bool = False) -> Any:
    """A server's JSON message, parsed and scrubbed: the raw text through ``scrub_received``
    before parsing (no local of a traceback holds the key), and, when the text has escapes
    (``\\u0073k-...`` parses into the key it spells), every string parsing made. ``binary``:
    the protocol may send JSON as a binary frame (UTF-8); else a binary frame is refused.
    Raises ``NotJSON`` for a binary frame, text that is not JSON, or JSON nested beyond what
    the parser takes."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        if not binary:
            raise NotJSON(f"a binary message ({len(raw)} bytes) where JSON text was expected")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise NotJSON(f"a binary message ({len(raw)} bytes) that is not UTF-8 text"
                          ) from None
    text = scrub_received(raw, key_vars)
    try:
        value = json.loads(text)
    except RecursionError:
        raise NotJSON("JSON nested deeper than the parser takes") from None
    except ValueError as e:
        raise NotJSON(f"not JSON ({getattr(e, 'msg', None) or type(e).__name__})") from None
    return scrub_parsed(value, key_vars) if "\\" in text else value


class ReceivedText:
    """Text a server streams in pieces (a transcript's deltas), scrubbed as a whole.

    Each piece is scrubbed where it is received, but a key split across pieces ("sk-ab",
    "cdef...") is whole in none of them: only the joined text shows it. ``text`` is the join
    through ``scrub_received``, so a secret is masked as soon as its last piece arrives,
    however it was split. To keep that linear, only a tail at least ``hold`` characters long
    (longer than any known secret) is rescanned; text before it is settled once scrubbing it
    apart gives what scrubbing it together does (no match crosses the cut). Text without a
    secret comes out exactly as received."""

    HOLD = 512

    def __init__(self, key_vars: tuple[str, ...] = (), hold: int = HOLD):
        self._key_vars = key_vars
        self._hold = hold
        self._done = ""  # settled and scrubbed
        self._tail = ""  # as received; may hold the start of a secret
        self._next_cut = 0
        self._text: str | None = ""

    def add(self, piece: str) -> None:
        self._tail += piece
        self._text = None
        if len(self._tail) >= self._next_cut:
            self._settle()

    def _scrub(self, text: str) -> str:
        return scrub_received(text, self._key_vars)

    def _settle(self) -> None:
        longest = max((len(v) for v, _ in _secret_values(os.environ)), default=0)
        hold = max(self._hold, longest + 1)
        cut = len(self._tail) - hold
        if cut > 0:
            head, rest = self._tail[:cut], self._tail[cut:]
            scrubbed = self._scrub(head)
            if scrubbed + self._scrub(rest) == self._scrub(self._tail):
                self._done, self._tail = self._done + scrubbed, rest
        self._next_cut = len(self._tail) + hold  # a failed cut (a long bearer token) waits

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._done + self._scrub(self._tail)
        return self._text

    def __len__(self) -> int:
        """About the characters received (settled text counts as scrubbed): for bounds."""
        return len(self._done) + len(self._tail)


class MaskingFilter(logging.Filter):
    """Rewrites a record whose message holds a key (``mask_secrets``); drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's business, not ours
            return True
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


LOGGERS_THAT_PRINT_HEADERS = ("websockets", "websockets.client", "websockets.server")


def install_log_filter() -> None:
    """``--log-level=DEBUG``: websockets logs every handshake header, ``Authorization``
    included. The masking filter on the loggers that print handshake headers (a filter applies to
    the records of its own logger only, so each one that logs gets it). Idempotent."""
    for name in LOGGERS_THAT_PRINT_HEADERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MaskingFilter) for f in logger.filters):
            logger.addFilter(MaskingFilter())
