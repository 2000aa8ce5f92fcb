"""The one online hub call, ``huggingface_hub.snapshot_download``, with a deadline, progress
lines and Ctrl-C.

huggingface_hub's HTTP client has no timeout of its own (``repo_info`` waits forever on a hub
that accepts and never answers), a per-read timeout cannot stop a server that drips a byte a
second, and its download threads are joined at exit, so a stuck read even outlives Ctrl-C. The
download therefore runs in a child process (``python -m pytest_duplexact.released.hub``):
every request without a timeout gets one (``HF_HUB_DOWNLOAD_TIMEOUT``, huggingface_hub's own
variable), and the parent kills the child at the deadline (``DUPLEXACT_HUB_TIMEOUT`` seconds
for the whole download) or on Ctrl-C. The child prints one JSON line: the folder, or the
error with every token scrubbed (a hub answering 400/401 may quote the request's
``authorization`` header back).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from .errors import ReleasedDataError

DEADLINE_ENV = "DUPLEXACT_HUB_TIMEOUT"
DEFAULT_DEADLINE_S = 3600.0  # the whole download; a snapshot of a few GB at a slow link
PROGRESS_EVERY_S = 15.0


def scrub_hub(text: object) -> str:
    """A hub message minus the token: every key of the environment (``HF_TOKEN`` ...) and any
    ``Bearer ...`` value (netsafety.mask_secrets), and the saved one (``hf auth login``)."""
    from ..remote.netsafety import mask_secrets

    text = mask_secrets(str(text))
    try:
        from huggingface_hub import get_token

        token = get_token()
    except Exception:  # no package, unreadable token file: nothing more to remove
        token = None
    return text.replace(token, "<HF token>") if token else text


def deadline_s() -> float:
    raw = os.environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ReleasedDataError(f"{DEADLINE_ENV}={raw!r}: expected a number of seconds > 0")
    return value


def download(repo: str, rev: str | None, log: Callable[[str], None] | None = None) -> dict:
    """``{"folder": ...}`` or ``{"error": "unreachable" | "failed", "message": ...}`` from
    the child; ReleasedDataError when the deadline passed. KeyboardInterrupt kills the child
    and propagates."""
    deadline = deadline_s()
    here = str(Path(__file__).resolve().parents[2])  # the child imports this very package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", __name__, repo, rev or ""], env=env,
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out = wait(proc, deadline, log or (lambda msg: None),
               what=f"downloading {repo} (revision {rev or 'main'})")
    try:
        return json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "failed", "message": f"the download process ended with exit status "
                                              f"{proc.returncode} and no answer"}


def wait(proc: subprocess.Popen, deadline: float, log: Callable[[str], None], what: str,
         every: float = PROGRESS_EVERY_S) -> bytes:
    """The child's stdout once it ends; a progress line every ``every`` seconds; killed at
    ``deadline`` (ReleasedDataError) or when anything interrupts the wait (Ctrl-C)."""
    start = time.monotonic()
    try:
        while True:
            left = deadline - (time.monotonic() - start)
            if left <= 0:
                raise ReleasedDataError(
                    f"{what}: no answer within {deadline:g} s; the hub hangs or is too slow "
                    f"(set {DEADLINE_ENV} to allow longer)")
            try:
                out, _ = proc.communicate(timeout=min(every, left))
                return out or b""
            except subprocess.TimeoutExpired:
                log(f"duplexact: still {what}: {time.monotonic() - start:.0f} s "
                    f"(gives up after {deadline:g} s; Ctrl-C stops it)")
    except BaseException:
        _kill(proc)
        raise


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, OSError, ValueError):  # pragma: no cover
        pass


def _child(repo: str, rev: str | None) -> dict:
    from huggingface_hub import constants, set_client_factory, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:  # the factory huggingface_hub itself installs, plus the read timeout
        from huggingface_hub.utils._http import default_client_factory
    except ImportError:  # pragma: no cover - another layout: the parent's deadline remains
        default_client_factory = None
    if default_client_factory is not None:
        cap = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)

        def capped(request):  # repo_info passes timeout=None, which overrides a client's
            t = request.extensions.get("timeout") or {}
            request.extensions["timeout"] = {k: cap if t.get(k) is None else t[k]
                                             for k in ("connect", "read", "write", "pool")}

        def with_timeout():  # every wait on the socket at most HF_HUB_DOWNLOAD_TIMEOUT (10 s)
            client = default_client_factory()
            client.event_hooks["request"] = [*client.event_hooks["request"], capped]
            return client

        set_client_factory(with_timeout)
    try:
        folder = snapshot_download(repo_id=repo, repo_type="dataset", revision=rev,
                                   allow_patterns=["*.parquet"])
    except LocalEntryNotFoundError as e:
        return {"error": "unreachable", "message": scrub_hub(e)}
    except Exception as e:
        return {"error": "failed", "message": scrub_hub(f"{type(e).__name__}: {e}")}
    return {"folder": str(folder)}


def _main(argv: list[str]) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends this process on Ctrl-C
    try:
        answer = _child(argv[0], argv[1] or None)
    except BaseException as e:  # never a traceback that could quote a token
        answer = {"error": "failed", "message": scrub_hub(f"{type(e).__name__}: {e}")}
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
