"""Never send an API key in clear to another machine.

A base URL (judges, transcriber, simulator, realtime models) that is plain ``http://`` or
``ws://`` and names a host other than this machine would carry the key unencrypted across the
network. That is refused unless the user opts in with ``DUPLEXACT_ALLOW_INSECURE_HTTP=1``
(e.g. a judge server inside a trusted private network). Loopback (127.0.0.0/8, ::1,
localhost) is always allowed: it never leaves the machine. The decision is made on the URL
alone, before any connection. ``Secret`` holds a key masked, so no traceback, log line or
report that mentions the holder can show it.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

ENV_ALLOW = "DUPLEXACT_ALLOW_INSECURE_HTTP"
_CLEAR = ("http", "ws")


def _loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or \
            host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
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
