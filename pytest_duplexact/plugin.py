"""pytest glue, kept thin (the pytest11 entry module): the options, the two fixtures the suites
use, and, when ``--duplexact-model`` is given, the run's ``RunConfig`` (every option read
once: pytest_plugin/config.py) and its ``DuplexactSession`` (session.py) registered as a
plugin, whose hook methods do the rest; both leave at unconfigure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .data.results import InstanceOutcome
from .pytest_plugin import options, own_tests, resumed
from .pytest_plugin.config import RunConfig
from .pytest_plugin.session import (
    PROPERTY,
    USAGE_PROPERTY,
    DuplexactSession,
    JudgeUnavailable,
    param_id,
)

__all__ = ["PROPERTY", "SESSION", "USAGE_PROPERTY", "JudgeUnavailable", "param_id",
           "session_of", "suites_dir"]

SESSION = pytest.StashKey[DuplexactSession]()
PLUGIN_NAME = "duplexact-session"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from .report import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .remote.netsafety import install_log_filter

    install_log_filter()  # --log-level=DEBUG shows websockets' handshake headers: keys masked
    config.addinivalue_line("markers", "duplexact: a DuplexAct benchmark instance")
    config.addinivalue_line("markers", "duplexact_unselected: an action outside the selection")
    taken = resumed.load(config)  # --duplexact-resume: the run's own model, options, selection
    if not options.get(config, "model"):
        given = _benchmark_options_given(config)
        if given:  # asked for a benchmark run, but not which model: nothing would run
            what = "is empty" if given == "--duplexact-model" else \
                "needs --duplexact-model, and none was given"
            raise pytest.UsageError(
                f"{given} {what}, so no benchmark runs; name the model to test, e.g. "
                "--duplexact-model=oracle (`duplexact models` lists them)")
        return  # not a benchmark run: no other option is read, none refused
    run = RunConfig.from_pytest(config)  # the session holds it (session.run_config)
    spec = run.model
    session = DuplexactSession(config, run)
    if taken and not session.worker:
        session.controller.notices.append(taken)
    config.stash[SESSION] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    # `pytest --duplexact-model=...` runs the suites shipped in the package, from anywhere;
    # explicit paths on the command line are respected.
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        note = None if session.worker else own_tests.note(config, spec)
        if note:
            session.controller.notices.append(note)
        config.args[:] = [str(suites_dir())]


def _benchmark_options_given(config: pytest.Config) -> str | None:
    """The first --duplexact-* option on the command line, if any (ini values are a
    project's standing settings and stay quiet without a model)."""
    for arg in config.invocation_params.args:
        if isinstance(arg, str) and arg.startswith("--duplexact-"):
            return arg.split("=", 1)[0]
    return None


@pytest.hookimpl(trylast=True)  # after the session's own pytest_unconfigure (its lock)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The session leaves the plugin manager as pytest's LogXML does: nothing of this run
    outlives its config (a later in-process run, pytester's, starts clean)."""
    session = config.stash.get(SESSION, None)
    if session is not None:
        del config.stash[SESSION]
        config.pluginmanager.unregister(session)


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
