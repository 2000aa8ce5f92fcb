"""What to say of a user's mistaken name or path: the one "did you mean" of a misspelt name (a
model, an action in a gate, ...), and why a path given as a folder is not one."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'wait'?)`` for the closest known name, else ``""``."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def not_a_folder(path: Path | str) -> str:
    """Why ``path``, given as a folder, is not one: ``a file, not a folder`` or ``no such
    folder`` (which alone sent a user who had given a file looking for a typo)."""
    return "a file, not a folder" if Path(path).exists() else "no such folder"
