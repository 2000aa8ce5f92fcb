"""pytest glue, kept thin (the pytest11 entry module): the options, the two fixtures the suites
use, and, when ``--duplexact-model`` is given, the run's ``DuplexactSession`` (session.py)
registered as a plugin, whose hook methods do the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .pytest_plugin import options
from .data.results import InstanceOutcome
from .pytest_plugin.session import (PROPERTY, USAGE_PROPERTY, DuplexactSession, JudgeUnavailable,
                                    param_id)

__all__ = ["PROPERTY", "SESSION", "USAGE_PROPERTY", "JudgeUnavailable", "param_id",
           "session_of", "suites_dir"]

SESSION = pytest.StashKey[DuplexactSession]()
PLUGIN_NAME = "duplexact-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "duplexact: a DuplexAct benchmark instance")
    config.addinivalue_line("markers", "duplexact_unselected: an action outside the selection")
    spec = options.get(config, "model")
    if not spec:
        return
    session = DuplexactSession(config, spec)
    config.stash[SESSION] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    # `pytest --duplexact-model=...` runs the suites shipped in the package, from anywhere;
    # explicit paths on the command line are respected.
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        note = None if session.worker else own_tests_note(config, spec)
        if note:
            session.notices.append(note)
        config.args[:] = [str(suites_dir())]


def own_tests_note(config: pytest.Config, spec: str) -> str | None:
    """A benchmark run collects the DuplexAct suites only: a project's own tests would make
    the benchmark's exit status (and its -n schedule) depend on them. Said once, with the
    command that runs both, when the project has tests pytest would otherwise have run."""
    import shlex

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
    import fnmatch
    import os
    from collections import deque

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


def session_of(config: pytest.Config) -> DuplexactSession | None:
    return config.stash.get(SESSION, None)


def suites_dir() -> Path:
    from importlib.resources import files

    return Path(str(files("pytest_duplexact.suites")))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Without a model the suites collect as one skipped test each (with a model, the session
    parametrizes them)."""
    if getattr(metafunc.function, "_duplexact_action", None) is None or \
            session_of(metafunc.config) is not None:
        return
    metafunc.parametrize("duplexact_instance", [pytest.param(None, marks=pytest.mark.skip(
        reason="the DuplexAct suites run with --duplexact-model=NAME"))], ids=["no-model"])


@pytest.fixture(scope="session")
def duplexact_harness(request):
    session = session_of(request.config)
    if session is None:
        pytest.skip("no --duplexact-model")
    from .pytest_plugin.session import ModelBuildError

    try:
        return session.harness
    except ModelBuildError:  # the instance's own setup reports it, once (session.outcome)
        return None


@pytest.fixture
def duplexact_outcome(request, duplexact_instance, duplexact_harness) -> InstanceOutcome:
    """Runs the instance during setup, so a model or harness crash is a pytest *error*."""
    return session_of(request.config).outcome(request.node, duplexact_instance)
