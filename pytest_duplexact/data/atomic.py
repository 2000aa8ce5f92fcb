"""Write-then-rename, the one way every file of a run (and every cache entry) is written: a
reader, a resumed run or a crash sees the old file or the whole new one, never a part.

The temporary is ``.<name>.<pid>.<random>.part`` in the target's folder (the same file system,
so the rename is atomic; unique per process and thread, so concurrent writers of one name
never share a temporary); a writer that fails removes it, a killed one leaves it for the next
attempt to clean (``RunDir.reopen``).
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PART_GLOB = ".*.part"


def _umask() -> int:
    mask = os.umask(0)  # reading it means setting it: done once, at import, before any thread
    os.umask(mask)
    return mask


# The mode a plain open() would give a file. A run's own files keep mkstemp's private 0600
# (docs/runs.md); a file the user names as an output (report/output.py) gets this.
FILE_MODE = 0o666 & ~_umask()


@contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """Yields a temporary path to write; on success it is renamed to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".part",
                               dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(path: Path | str, data: bytes, mode: int | None = None) -> None:
    """``data`` as the whole new ``path``. A failed write (full disk, quota) is an OSError
    naming ``path``, e.g. ``[Errno 28] No space left on device: '.../report.json'``.
    ``mode``: the file's mode (``FILE_MODE`` for an output the user named); None keeps the
    temporary's private 0600."""
    with replacing(path) as tmp:
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            if mode is not None:
                os.chmod(tmp, mode)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None


def write_text(path: Path | str, text: str, mode: int | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), mode)
