"""One process per run directory: an exclusive lock held for the run's duration.

Two runs writing one folder delete each other's temporary files and interleave outcomes; the
second one now stops at once with the holder named (pid, host, command, start time). The
lock is ``flock`` on ``<run dir>/.lock``: the kernel drops it when the holder dies, so a
killed run never leaves a stale lock behind (the file's text is only the holder's card).
Under pytest-xdist the controller holds it for its workers. Where ``fcntl`` does not exist
(Windows) runs are not locked, and docs/runs.md says so. The card outlives its run (a
``kill -9``) and is shown to the next one: it is 0600 like the other run files, and its
command line has URL passwords, keys and secret-looking option values masked.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path

from ..remote.netsafety import mask_credentials, mask_secrets

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

LOCK_FILE = ".lock"

# an option whose value is a secret by its name: ``api_key=...``, ``--token ...``,
# ``--duplexact-model-option=password=...``
_SECRET_OPTION = re.compile(
    r"(?i)((?:^|[\s=-])[\w.-]*(?:keys?|token|secret|passw(?:or)?d|credentials?|auth)"
    r"(?![a-z])[\w.-]*(?:=|\s+))(?!-)\S+")


class RunDirLocked(RuntimeError):
    pass


class RunLock:
    def __init__(self, path: Path, fd: int | None):
        self.path, self._fd = path, fd

    @classmethod
    def acquire(cls, run_dir: Path) -> "RunLock":
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOCK_FILE
        if fcntl is None:
            return cls(path, None)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_card(fd)
            os.close(fd)
            raise RunDirLocked(
                f"run directory {run_dir} is in use by another run ({holder}); wait for it "
                "to finish or choose another --duplexact-run-dir") from None
        card = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": masked_command(" ".join(sys.argv))[:500]}
        os.fchmod(fd, 0o600)  # a card an older release wrote 0644
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(card) + "\n").encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock


def masked_command(command: str) -> str:
    """``command`` fit for the card and the "in use" message: the ``user:password@`` of
    URLs, every key this process knows (netsafety) and the values of secret-looking options
    masked."""
    return _SECRET_OPTION.sub(r"\1***", mask_secrets(mask_credentials(command)))


def _read_card(fd: int) -> str:
    try:
        card = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return (f"pid {card.get('pid')} on {card.get('host')}, started {card.get('started')}: "
                f"{masked_command(str(card.get('command')))}")
    except (OSError, ValueError, AttributeError):
        return "holder unknown"
