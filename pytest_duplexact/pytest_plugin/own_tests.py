"""A benchmark run inside a user's project (``pytest --duplexact-model=...`` with no paths)
collects the DuplexAct suites only; when the project has tests pytest would otherwise have
run, the run says so once, with the command that runs both (README, "Running it on your
model")."""

from __future__ import annotations

import fnmatch
import os
import shlex
from collections import deque
from pathlib import Path

import pytest


def note(config: pytest.Config, spec: str) -> str | None:
    """A benchmark run collects the DuplexAct suites only: a project's own tests would make
    the benchmark's exit status (and its -n schedule) depend on them. Said once, with the
    command that runs both, when the project has tests pytest would otherwise have run."""
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        where, paths = "testpaths: " + " ".join(config.args), list(config.args)
    else:
        root = Path(config.invocation_params.dir)
        found = _a_test_file(root, config.getini("python_files") or ["test_*.py"],
                             config.getini("norecursedirs") or [],
                             anywhere=config.inipath is not None)
        if found is None:
            return None
        where, paths = f"e.g. {found}", ["."]
    # ./tests, not tests: under --pyargs an importable `tests` package would win
    shown = " ".join(shlex.quote(p if Path(p).is_absolute() or p.startswith(".") else f"./{p}")
                     for p in paths)
    return (f"duplexact: this run collects the DuplexAct suites only; this project's own tests "
            f"({where}) are not collected. To run both: pytest {shown} --pyargs "
            f"pytest_duplexact.suites --duplexact-model={shlex.quote(spec)}")


def _a_test_file(root: Path, patterns: list[str], norecurse: list[str], *, anywhere: bool,
                 budget: int = 5000) -> str | None:
    """A file under ``root`` pytest would collect as a test module, looked for breadth-first
    (tests/ and test/ first) in the folders pytest recurses into, over at most ``budget``
    folders and .py files. Without a pytest configuration (``anywhere`` false: ``root`` may
    be a home folder, not a project) only tests/ and test/ are looked in."""
    def skipped(d: str, path: str) -> bool:
        return any(fnmatch.fnmatch(d, p) for p in norecurse) or \
            os.path.isfile(os.path.join(path, "pyvenv.cfg"))  # pytest skips virtualenvs too

    conventional = [root / d for d in ("tests", "test") if (root / d).is_dir()]
    queue = deque(conventional + ([root] if anywhere else []))
    seen, visited = 0, set()
    while queue and seen <= budget:
        here = queue.popleft()
        if here in visited:
            continue
        visited.add(here)
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if not skipped(e.name, e.path):
                    queue.append(Path(e.path))
                    seen += 1
            elif e.name.endswith(".py"):
                seen += 1
                if any(fnmatch.fnmatch(e.name, p) for p in patterns):
                    return os.path.relpath(e.path, root)
    return None
