"""pytest glue, kept thin: options, collection of the suites, the per-instance fixture, and the
controller-side aggregation that decides the report and (with gates) the exit status.

Outcomes travel on each TestReport's ``user_properties`` (so pytest-xdist carries them from
workers for free); only the controller aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import options
from .results import InstanceOutcome, Verdict

PROPERTY = "duplexact"
USAGE_PROPERTY = "duplexact_usage"


@dataclass
class State:
    """What the plugin knows for this pytest process (controller or worker)."""

    model_spec: str
    settings: dict
    instances: list
    run_dir: Path
    gates: list = field(default_factory=list)
    outcomes: dict = field(default_factory=dict)  # nodeid -> outcome dict (controller)
    harness: object = None
    resumed: dict = field(default_factory=dict)  # instance id -> outcome dict
    report: dict | None = None
    gate_results: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # printed in the terminal summary
    usage: dict = field(default_factory=dict)  # nodeid -> remote-service cost of the instance
    messages: list = field(default_factory=list)  # terminal only, not in the report (resume)
    lock: object = None  # runlock.RunLock of the run directory (controller / serial run)
    baseline: str | None = None  # report gated against (--duplexact-baseline / -compare)


STATE = pytest.StashKey[State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config) -> bool:
    return not _is_worker(config) and getattr(config.option, "numprocesses", None) not in (
        None, 0, "0")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "duplexact: a DuplexAct benchmark instance")
    config.addinivalue_line("markers", "duplexact_unselected: an action outside the selection")
    spec = options.get(config, "model")
    if not spec:
        return
    from .session import build_state

    state = build_state(config, spec)
    config.stash[STATE] = state
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "duplexact-xdist")
    # `pytest --duplexact-model=...` runs the suites shipped in the package, from anywhere;
    # explicit paths on the command line are respected.
    from _pytest.config import Config as _C

    if config.args_source != _C.ArgsSource.ARGS:
        config.args[:] = [str(suites_dir())]


def suites_dir() -> Path:
    from importlib.resources import files

    return Path(str(files("pytest_duplexact.suites")))


class _XdistHooks:
    """Registered only where pytest-xdist is installed (its hooks must exist)."""

    def pytest_configure_node(self, node) -> None:
        state = node.config.stash.get(STATE, None)
        if state is not None:
            node.workerinput["duplexact_run_dir"] = str(state.run_dir)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    action = getattr(metafunc.function, "_duplexact_action", None)
    if action is None:
        return
    state = metafunc.config.stash.get(STATE, None)
    if state is None:
        metafunc.parametrize("duplexact_instance", [pytest.param(None, marks=pytest.mark.skip(
            reason="the DuplexAct suites run with --duplexact-model=NAME"))], ids=["no-model"])
        return
    insts = [i for i in state.instances if i.action == action]
    if not insts:  # this action is not selected: deselect it rather than show a skip
        metafunc.parametrize("duplexact_instance", [pytest.param(None, marks=_UNSELECTED)],
                             ids=["unselected"])
        return
    metafunc.parametrize("duplexact_instance", insts, ids=[param_id(i) for i in insts])


_UNSELECTED = pytest.mark.duplexact_unselected


def pytest_collection_modifyitems(config, items) -> None:
    drop = [it for it in items if it.get_closest_marker("duplexact_unselected")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [it for it in items if not it.get_closest_marker("duplexact_unselected")]


def param_id(inst) -> str:
    """``delayed-casual-03`` for instance ``take_turn-delayed-casual-03``: the condition leads
    (so ``-k delayed`` selects it) and the instance id follows without repeating it."""
    prefix = f"{inst.action}-{inst.condition}-"
    rest = inst.id[len(prefix):] if inst.id.startswith(prefix) else inst.id
    return f"{inst.condition}-{rest}"


@pytest.fixture(scope="session")
def duplexact_harness(request):
    state = request.config.stash.get(STATE, None)
    if state is None:
        pytest.skip("no --duplexact-model")
    if state.harness is None:
        from .session import build_harness

        state.harness = build_harness(request.config, state)
    return state.harness


def _queued_indices(session) -> list[int]:
    """Indices into session.items of the tests this process will run next. Under xdist a
    worker only knows the tests scheduled to it so far: peek at its queue."""
    for plugin in session.config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if type(plugin).__name__ == "WorkerInteractor" and queue is not None:
            with queue.lock() as items:
                return [i for i in items if isinstance(i, int)]
    return []


def _upcoming(request, state, n: int) -> list:
    """The next n instances this process will run (not yet finished), in order."""
    session, node = request.session, request.node
    if _is_worker(session.config):
        indices = _queued_indices(session)
    else:
        try:
            start = session.items.index(node) + 1
        except ValueError:
            return []
        indices = range(start, len(session.items))
    out = []
    for i in indices:
        inst = getattr(getattr(session.items[i], "callspec", None), "params", {}).get(
            "duplexact_instance")
        if inst is not None and inst.id not in state.resumed:
            out.append(inst)
            if len(out) >= n:
                break
    return out


class JudgeUnavailable(Exception):
    """A judge was asked and gave no usable verdict: the measurement is incomplete (an error,
    never a NO and never a YES)."""


@pytest.fixture
def duplexact_outcome(request, duplexact_instance, duplexact_harness) -> InstanceOutcome:
    """Runs the instance during setup, so a model or harness crash is a pytest *error*."""
    state = request.config.stash[STATE]
    inst = duplexact_instance
    done = state.resumed.get(inst.id)
    if done is not None:
        outcome = InstanceOutcome.from_dict(done)
        if done.get("usage") is not None:  # what it cost when it ran (journal.USAGE_KEY)
            request.node.user_properties.append((USAGE_PROPERTY, done["usage"]))
    else:
        if duplexact_harness.prefetcher is not None:  # keep `concurrency` trials in flight
            duplexact_harness.prefetcher.submit(
                [inst] + _upcoming(request, state, 2 * duplexact_harness.prefetcher.concurrency))
        from . import usage

        before = usage.snapshot(duplexact_harness)
        try:
            outcome = duplexact_harness.run(inst)
        except Exception as exc:
            outcome = duplexact_harness.error_outcome(inst, exc)
            request.node.user_properties.append((PROPERTY, outcome.to_dict()))
            raise
        finally:
            request.node.user_properties.append(
                (USAGE_PROPERTY, usage.delta(usage.snapshot(duplexact_harness), before)))
    request.node.user_properties.append((PROPERTY, outcome.to_dict()))
    stages = [outcome.immediate, outcome.subsequent]
    bad = [s for s in stages if s is not None and s.verdict is Verdict.JUDGE_ERROR]
    if bad:
        raise JudgeUnavailable(bad[0].reason)
    return outcome


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if _CONTROLLER is None:
            return
        if name == PROPERTY:
            _CONTROLLER.outcomes[report.nodeid] = value
        elif name == USAGE_PROPERTY:
            _CONTROLLER.usage[report.nodeid] = value


_CONTROLLER: State | None = None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    global _CONTROLLER
    state = session.config.stash.get(STATE, None)
    _CONTROLLER = state if state is not None and not _is_worker(session.config) else None
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if _CONTROLLER is not None and tr is not None:  # shown before the long run starts
        for line in _CONTROLLER.messages:
            tr.write_line(line)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or _is_worker(session.config):
        return
    from .session import finish

    new_status = finish(session.config, state, int(exitstatus))
    if new_status is not None:
        session.exitstatus = new_status


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or _is_worker(config) or state.report is None:
        return
    from .report.terminal import render

    for line in render(state.report, state.gate_results):
        terminalreporter.write_line(line)
    for line in state.messages:
        terminalreporter.write_line(line)


def pytest_unconfigure(config) -> None:
    global _CONTROLLER
    _CONTROLLER = None
    state = config.stash.get(STATE, None)
    if state is not None and state.lock is not None:
        state.lock.release()
    if state is not None and getattr(state.harness, "prefetcher", None) is not None:
        state.harness.prefetcher.close()
