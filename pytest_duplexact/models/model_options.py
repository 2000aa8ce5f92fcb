"""Options for the built-in network adapters: strings in, typed dataclass fields out, and the
rule for where a key may travel.

``--duplexact-model-option KEY=VALUE`` hands every value over as a string. ``build`` checks
the names against the adapter's dataclass, converts each value to its field's type and names
the option when it does not fit. ``check_transport`` refuses to send a key in clear text to
another machine (plain ``http``/``ws`` to a non-loopback host) unless the user opted in.
``scrub`` keeps keys out of provider messages; ``connect_error`` turns a failed handshake into
the error every network adapter raises (retried when transient); ``tls_context`` is the one TLS
context per CA file every secure connection shares.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import ssl
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from .contract import ModelError
from .streaming_contract import ServerUnreachable, TransientModelError

T = TypeVar("T")

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
TRANSIENT_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})  # rate limits, server busy


class ModelConfigError(ModelError):
    """The model cannot run as configured (missing key, package or server, bad option, files
    that are not the checkpoint they should be): raised before any instance starts. The one
    class every adapter raises (also read as ``openai_realtime.ModelConfigError`` and the
    like, where it is imported)."""


_SCALARS = {"bool": "true or false", "int": "an integer", "float": "a number"}
_PLAIN = {"bool", "int", "float", "str", "None", "Optional", "Union", "typing"}


def _type_names(annotation: Any, default: Any) -> set[str]:
    """The names in a parameter's or field's annotation (a string under ``from __future__
    import annotations``); with none, the type of a scalar default."""
    if annotation is inspect.Parameter.empty or annotation is dataclasses.MISSING:
        return {type(default).__name__} if isinstance(default, (bool, int, float)) else set()
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__",
                                                                   str(annotation))
    return set(re.findall(r"[A-Za-z_]\w*", text))


def _scalar(names: set[str], value: str) -> tuple[bool, Any]:
    """(True, the value converted) when a command-line string fits the bool, int or float
    ``names`` allow, (False, value) when it fits none of them; None for ``none``/``null``
    where None is allowed."""
    if "None" in names and value.lower() in ("none", "null", ""):
        return True, None
    for t in (t for t in _SCALARS if t in names):
        if t == "bool":
            if value.lower() in _TRUE + _FALSE:
                return True, value.lower() in _TRUE
            continue
        try:
            return True, (int if t == "int" else float)(value)
        except ValueError:
            pass
    return False, value


def value_problem(annotation: Any, default: Any, value: Any) -> str | None:
    """What a command-line (string) value lacks to fit an option declared (or defaulted) as
    a bool, int or float, or None when it fits or the type says nothing we can check (no
    annotation, a str, a class of the model's own). The one reading of option values: a
    user's factory's signature (the registry) and an adapter's dataclass (``coerce``)."""
    if not isinstance(value, str):
        return None
    names = _type_names(annotation, default)
    wanted = [t for t in _SCALARS if t in names]
    if not wanted or names - _PLAIN or _scalar(names, value)[0]:
        return None
    return " or ".join(_SCALARS[t] for t in wanted)


def coerce(label: str, field: dataclasses.Field, value: Any) -> Any:
    """One option value converted to its field's type (strings from the command line)."""
    if not isinstance(value, str):
        return value
    names = _type_names(field.type, field.default)
    if "None" in names and value.lower() in ("none", "null", ""):
        return None
    if value_problem(field.type, field.default, value) is not None:
        raise ModelConfigError(f"{label} option {field.name}: expected {field.type}, "
                               f"got {value!r}")
    return _scalar(names, value)[1] if names & set(_SCALARS) else value


def build(cls: type[T], label: str, key_env: str | None, options: dict[str, Any]) -> T:
    """``cls(**options)`` with the options checked by name and converted by type."""
    if "api_key" in options:
        where = f"set {key_env} in the environment" if key_env else "keys are not options"
        raise ModelConfigError(f"{label}: do not pass the API key as an option; {where}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ModelConfigError(f"{label}: unknown option(s) {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(fields))}")
    return cls(**{k: coerce(label, fields[k], v) for k, v in options.items()})


def require_positive(label: str, options: Any, *names: str) -> None:
    """Each of these fields of ``options`` is > 0 (timeouts, chunk sizes), in this order."""
    for name in names:
        if getattr(options, name) <= 0:
            raise ModelConfigError(f"{label}: {name} must be positive")


def check_transport(label: str, url: str, *, key_env: str, carries_key: bool,
                    allow_insecure: bool) -> None:
    """Refuse a URL that would send the key unencrypted to another machine: the package's
    one rule (netsafety.py), opted out of by ``allow_insecure=true`` or its environment
    switch."""
    from ..remote.netsafety import (
        ENV_ALLOW,
        insecure_url_problem,
        remember_secret,
        remember_url_credentials,
    )

    remember_secret(os.environ.get(key_env), key_env)  # masked in all a server sends back
    remember_url_credentials(url)
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "ws", "wss"):
        raise ModelConfigError(f"{label}: URL {url!r} must start with http://, https://, "
                               "ws:// or wss://")
    if not carries_key or allow_insecure:
        return
    if insecure_url_problem(url, label) is not None:
        host = urlsplit(url).hostname
        raise ModelConfigError(
            f"{label}: refusing to send {key_env} over unencrypted {scheme}:// to {host}. Use "
            f"https:// or wss://, or set the model option allow_insecure=true (or "
            f"{ENV_ALLOW}=1) if that network is trusted")


def scrub(text: Any, *key_vars: str) -> Any:
    """A provider message minus the keys in these environment variables, should a server
    ever echo one back. ``bytes`` (a raw server frame) stay bytes; anything else becomes
    its ``str`` through the one scrub of received text (``netsafety.scrub_received``: also
    every key the environment holds, bearer values and URL credentials)."""
    if isinstance(text, bytes):
        for var in key_vars:
            key = os.environ.get(var)
            if key and key.encode() in text:
                text = text.replace(key.encode(), f"<{var}>".encode())
        return text
    from ..remote.netsafety import scrub_received

    return scrub_received(str(text), key_vars)


def server_message(raw: Any, label: str, *key_vars: str, binary: bool = False
                   ) -> dict[str, Any]:
    """One message of a JSON-over-WebSocket protocol as a dict, scrubbed before and after
    parsing (``netsafety.received_json``: a key written with JSON escapes is masked too). A
    binary frame where text is expected (unless ``binary``), text that is not JSON, or JSON
    that is not an object is a ``ModelError`` saying the server does not speak ``label``'s
    protocol (a wrong server, never a traceback)."""
    from ..remote.netsafety import NotJSON, received_json

    why = None
    try:
        msg = received_json(raw, key_vars, binary=binary)
    except NotJSON as e:
        why = str(e)
    else:
        if isinstance(msg, dict):
            return msg
        why = f"a JSON {type(msg).__name__} where an event object was expected"
    raise ModelError(f"{label}: the server sent {why}: it does not speak {label}'s protocol "
                     "(is the URL the right server?)")


def probe_connection(connect: Any, failed: Any, hint: str) -> Any:
    """``connect()``, a blocking connection for a probe; a failure as one configuration line,
    ``failed(e)`` (the adapter's connect error) and ``hint`` (where the server should be).
    Raised outside the ``except`` that holds the library's error, which may quote the
    server's answer."""
    try:
        return connect()
    except Exception as e:
        why = f"{failed(e)}; {hint}"
    raise ModelConfigError(why)


MALFORMED = (TypeError, ValueError, AttributeError, KeyError, OverflowError)


def translated(translate: Any, msg: dict[str, Any], label: str, where: str,
               *key_vars: str) -> list:
    """``translate(msg)``, the events of one server message; a malformed one (a field of the
    wrong type or shape: audio that is not whole samples, a list where an object belongs) is a
    short ``ModelError`` naming its type and the server, never a traceback."""
    try:
        return translate(msg)
    except MALFORMED as e:
        kind, why = scrub(str(msg.get("type"))[:60], *key_vars), type(e).__name__
    raise ModelError(f"{label}: a malformed {kind!r} message from {where} ({why})")


def connect_error(e: BaseException, label: str, key_vars: tuple[str, ...], *,
                  rejected: str = "the server rejected the API key",
                  not_found: str | None = None, transient: frozenset[int] = TRANSIENT_HTTP,
                  busy: str = "rate limit or server busy", other: str = "") -> ModelError:
    """A failed handshake as the error that says what to do, never echoing a key: HTTP
    401/403 -> check ``key_vars``; 404 -> ``not_found`` (what it means for this provider);
    ``transient`` statuses and socket failures (refused, reset, timed out) are retried."""
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status in (401, 403):
        return ModelConfigError(f"{label}: {rejected} (HTTP {status}); check "
                                f"{' / '.join(key_vars)}")
    if status == 404 and not_found:
        return ModelError(f"{label}: HTTP 404 from {not_found}")
    if status in transient:
        return TransientModelError(f"{label}: HTTP {status} on connect ({busy})")
    if status is not None:
        return ModelError(f"{label}: HTTP {status} on connect{other}")
    why = f"{label}: could not connect: {type(e).__name__}: {scrub(e, *key_vars)}"
    if isinstance(e, OSError):  # refused, reset, timed out (TimeoutError is an OSError)
        return ServerUnreachable(why)
    if "websockets" in type(e).__module__:
        return TransientModelError(why)
    return ModelError(why)


_TLS: dict[str, ssl.SSLContext] = {}


def tls_context(ca_file: str = "", *, verify: bool = True) -> ssl.SSLContext:
    """The verifying TLS context for ``ca_file`` (empty: the system's CA bundle). Loading a
    bundle costs ~40 ms of CPU on the event loop that also paces every other session's input,
    so each is made once per process and shared. ``verify=False`` (the user's opt-in for a
    self-signed demo server): a context that checks neither the certificate nor the name."""
    key = ca_file if verify else "\0insecure"
    if key not in _TLS:
        ctx = ssl.create_default_context(cafile=ca_file or None)
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        _TLS[key] = ctx
    return _TLS[key]


# --- servers the user starts (the open models' own demo servers) ------------------------------

def shown_url(url: str) -> str:
    """``url`` as it may appear in a message or a log: a ``user:password@`` part is masked."""
    from ..remote.netsafety import mask_credentials

    return mask_credentials(url)


def scrub_url(text: Any, url: str) -> str:
    """A library's message minus the credentials of ``url`` (a proxy password in it)."""
    text = str(text)
    parts = urlsplit(url)
    for secret in (parts.password, parts.username):
        for form in {secret, unquote(secret or "")}:  # as written, and as a server echoes it
            if form:
                text = text.replace(form, "***")
    return text


def check_server_url(label: str, url: str, example: str) -> None:
    """A demo server's address is required and must be http(s); a password in it only travels
    encrypted or to this machine (the key rule of ``check_transport``)."""
    if not url:
        raise ModelConfigError(
            f"{label}: no server. Start the model's own server (docs/models.md) and pass its "
            f"address as --duplexact-model-option server_url={example}")
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise ModelConfigError(f"{label}: server_url {shown_url(url)!r} must start with "
                               "http:// or https://")
    from ..remote.netsafety import ENV_ALLOW, insecure_url_problem, remember_url_credentials

    remember_url_credentials(url)  # as written, decoded, and the Basic header sent from it
    if urlsplit(url).password and insecure_url_problem(url, label) is not None:
        raise ModelConfigError(
            f"{label}: refusing to send the password in server_url {shown_url(url)!r} over "
            f"unencrypted http:// to another machine. Use https:// (or an SSH tunnel to "
            f"127.0.0.1), or set {ENV_ALLOW}=1 if that network is trusted")
