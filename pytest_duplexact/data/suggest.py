"""What to say of a user's mistaken name or path: the one "did you mean" of a misspelt name (a
model, an action in a gate, ...), why a path given as a folder is not one, and why nothing can
be written at a path (``blocking_parent``, ``new_folder_problem``; report/output.py's
``output_problem`` for a file)."""

from __future__ import annotations

import difflib
import os
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


def blocking_parent(path: Path | str, start: Path | None = None) -> str | None:
    """Why nothing can be made at ``path`` because of the folders above it: the nearest one
    that exists is a file, a link to nothing, a folder the user may not write in, or one
    that cannot be looked into (EACCES, which ``Path.exists`` raises). None when it can (as
    far as can be told before writing). Folders under ``start`` are named relative to it,
    as the user typed them."""
    def shown(place: Path) -> Path:
        try:
            return place.relative_to(start) if start is not None else place
        except ValueError:
            return place

    for parent in Path(path).parents:
        try:
            if parent.is_dir():
                if not os.access(parent, os.W_OK | os.X_OK):
                    return f"no permission to write in {shown(parent)}"
                return None
            if parent.is_symlink() and not parent.exists():
                return f"{shown(parent)} is a link to nothing"
            if parent.exists():
                return f"{shown(parent)} is {not_a_folder(parent)}"
        except OSError as e:
            return f"cannot look into {shown(parent)} ({e.strerror or e})"
    return None


def new_folder_problem(path: Path | str, flag: str) -> str | None:
    """Why ``path``, given with the option ``flag`` as the folder a command fills, cannot be
    one, as ``FLAG PATH: why; what to do``: a file, a folder that holds files, a parent that
    is a file or not writable. None when it can (missing, or an empty folder)."""
    p = Path(path)
    where, fix = f"{flag} {p}", f"give a new or empty folder with {flag} DIR"
    if p.is_symlink() and not p.exists():
        return f"{where}: a link to nothing; {fix}"
    if p.exists() and not p.is_dir():
        return f"{where}: {not_a_folder(p)}; {fix}"
    if p.is_dir():
        try:
            full = any(p.iterdir())
        except OSError as e:
            return f"{where}: cannot be read ({e.strerror or e}); {fix}"
        if full:
            return f"{where}: exists and is not empty; {fix} (nothing is written over files)"
        if not os.access(p, os.W_OK | os.X_OK):
            return f"{where}: no permission to write in it; {fix}"
        return None
    why = blocking_parent(p)
    return f"{where}: {why}; {fix}" if why else None
