"""What the report commands write and print: the one way an output file a user named
(``--html``, ``--markdown``, ``-o``) is checked and written, and stdout that a reader may close.

``output_problem`` says why a path cannot take a file (a folder, a parent that is a file, a
parent the user may not write in, one of the command's own input files) before any work is
done, so ``duplexact report R --html afile/x.html`` says so at once instead of after
rendering; ``write_output`` checks again, creates the missing folders and writes through
``data/atomic.py`` (write-then-rename: a page is whole or absent), every failure an
``OutputError`` naming the path. ``print_lines`` prints; when stdout is a pipe its reader closed
(``| head``), printing stops quietly, as the Python documentation advises for SIGPIPE: stdout
goes to the null device, so neither later prints nor the exit's flush raise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable

from ..data.atomic import FILE_MODE, replacing
from ..data.suggest import blocking_parent


class OutputError(OSError):
    """An output file that cannot be written; the message names the path and why."""


def _where(path: Path, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def output_problem(path: str | Path, flag: str = "", example: str = "report.html",
                   inputs: Iterable[str | Path] = ()) -> str | None:
    """Why ``path`` cannot take a new file, as ``cannot write FLAG PATH: why``; None when it
    can (as far as can be told before writing). ``flag`` is the option that named it;
    ``example`` the file name suggested for a folder; ``inputs`` files the command reads,
    never to be overwritten by its output."""
    p = Path(path)
    where = _where(p, flag)
    try:
        is_folder = p.is_dir()
    except OSError:  # EACCES above it: blocking_parent names the folder
        is_folder = False
    if is_folder:
        suggested = _where(p / example, flag)
        return f"cannot write {where}: {p} is a folder: give a file name, e.g. {suggested}"
    for given in inputs:
        try:
            same = p.exists() and p.samefile(given)
        except OSError:
            same = False
        if same:
            return f"cannot write {where}: it is the input {given}; give another file name"
    why = blocking_parent(p)  # the nearest parent that exists: a file, or no permission
    return f"cannot write {where}: {why}" if why else None


def check_output(path: str | Path, flag: str = "", example: str = "report.html",
                 inputs: Iterable[str | Path] = ()) -> None:
    """``output_problem`` as an ``OutputError``."""
    problem = output_problem(path, flag, example, inputs)
    if problem:
        raise OutputError(problem)


def write_output(path: str | Path, text: str, flag: str = "",
                 example: str = "report.html") -> Path:
    """``text`` (UTF-8) as the whole new file ``path``, its folders made, its mode what a plain
    write would give (``atomic.FILE_MODE``; a run's own files stay private); an
    ``OutputError`` when it cannot be written (a folder, a parent that is a file, no
    permission, a full disk)."""
    out = Path(path)
    check_output(out, flag, example)
    try:
        with replacing(out) as tmp:
            tmp.write_bytes(text.encode("utf-8"))
            os.chmod(tmp, FILE_MODE)
    except OSError as e:
        raise OutputError(f"cannot write {_where(out, flag)}: {e.strerror or e}") from None
    return out


def stdout_gone() -> None:
    """stdout's reader has gone: send what is left (and whatever comes) to the null device."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # held open for the rest of the run
    finally:
        os.close(null)


def print_lines(lines: Iterable[str]) -> bool:
    """Print each line and flush; False (and stdout silenced) when the reader closed it."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()
        return False
    return True
