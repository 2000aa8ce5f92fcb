"""The upstream harness's shared pieces: where the authors' checkouts and environments are,
the skip when they are absent, and the table each module adds its measured row to.

Layout under ``$DUPLEXACT_UPSTREAM_DIR`` (docs/models.md, "Checked against the authors' code"):

    <owner>+<name>/        a git checkout of the author's repository (a work tree)
    <owner>+<name>.venv/   optional: the Python environment the author's code runs in
                           (its packages are listed per model in that module's docstring);
                           absent, the author's code runs in this interpreter

Nothing here or in the modules copies the authors' code: their processes are started from
their checkout, with our stubs put first on their ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

UPSTREAM_ENV = "DUPLEXACT_UPSTREAM_DIR"
# Where benchmarks/upstream.py collects each module's row (a JSON-lines file), when set.
TABLE_ENV = "DUPLEXACT_UPSTREAM_TABLE"
STUBS = Path(__file__).resolve().parent / "stubs"


@dataclass(frozen=True)
class Checkout:
    """One author's repository as the harness found it."""

    repo: str            # owner/name, as GitHub spells it
    path: Path           # the work tree
    commit: str          # HEAD's full hash
    date: str            # HEAD's commit date, YYYY-MM-DD
    python: str          # the interpreter its code runs under

    @property
    def short(self) -> str:
        return f"{self.repo}@{self.commit[:12]}"


def upstream_root() -> Path | None:
    value = os.environ.get(UPSTREAM_ENV, "")
    return Path(value) if value else None


def checkout(repo: str) -> Checkout:
    """The checkout of ``owner/name``, or a skip that says what to set and where."""
    root = upstream_root()
    if root is None:
        pytest.skip(f"{UPSTREAM_ENV} is not set: it names a folder holding the authors' "
                    f"checkouts (<owner>+<name>/), e.g. {repo.replace('/', '+')}/")
    path = root / repo.replace("/", "+")
    if not (path / ".git").exists():
        pytest.skip(f"{UPSTREAM_ENV}={root} has no checkout of {repo} at {path}")
    head = subprocess.run(["git", "-C", str(path), "log", "-1", "--format=%H %cs"],
                          capture_output=True, text=True, check=True).stdout.split()
    venv = root / (path.name + ".venv") / "bin" / "python"
    return Checkout(repo, path, head[0], head[1], str(venv) if venv.exists() else sys.executable)


def record_row(model: str, ck: Checkout, **measured: object) -> None:
    """Adds this model's measured row to the harness table (benchmarks/upstream.py prints it).
    Keys used across modules: connects, audio, text, barge_in_stop (bool or None = not
    applicable), onset_err_ms_median, onset_err_ms_max, sessions (at once), notes."""
    path = os.environ.get(TABLE_ENV)
    if not path:
        return
    row = {"model": model, "checked": ck.short, "date": ck.date, **measured}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, sort_keys=True) + "\n")
