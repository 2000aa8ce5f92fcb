"""The session's state by role (pytest_plugin/session_state.py): a serial run's one process
plays controller and worker, so it fills both objects; what the run is stays on the session."""

from __future__ import annotations

from pytest_duplexact.pytest_plugin.session_state import ControllerState, WorkerState


class _Keep:
    """The run's session as its own hooks left it (the plugin's sessionfinish runs first)."""

    session = None

    def pytest_sessionfinish(self, session):
        self.session = session.config.pluginmanager.get_plugin("duplexact-session")


def test_a_serial_run_fills_the_controller_and_the_worker_state(pytester):
    keep = _Keep()
    result = pytester.inline_run("--duplexact-model=silent", "--duplexact-action=wait",
                                 "--duplexact-limit=1", "--duplexact-run-dir=run",
                                 "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:asyncio",
                                 "-p", "no:benchmark",
                                 plugins=[keep])
    s = keep.session
    assert isinstance(s.controller, ControllerState) and isinstance(s.runner, WorkerState)
    ran = {r.nodeid for r in result.getreports("pytest_runtest_logreport")}
    assert ran and set(s.controller.outcomes) == ran
    assert {o["id"] for o in s.controller.outcomes.values()} == s.controller.expected
    assert s.controller.report is not None and s.controller.lock is not None
    assert s.controller.started > 0 and s.controller.billed_ids <= ran
    assert s.runner.harness is not None and s.runner.unreached == 0
    assert s.run_dir.name == "run" and not s.worker


def test_each_session_has_its_own_state():
    a, b = ControllerState(), ControllerState()
    a.outcomes["x"] = {}
    a.messages.append("said")
    assert b.outcomes == {} and b.messages == [] and a.termination is not b.termination
    assert WorkerState().harness is None and WorkerState().unreached == 0


def test_the_models_traits_are_read_once_per_session_not_per_test(pytester, monkeypatch):
    """Asked per test (and per look-ahead instance), traits() costs ~0.15 ms of Protocol
    checks in the pytest thread, which shares the GIL with the streaming loop: the session
    reads them once (its model's ``unsupported`` is still asked each time)."""
    from pytest_duplexact.pytest_plugin import session as session_module

    calls = []
    real = session_module.traits

    def counted(model):
        calls.append(model)
        return real(model)

    monkeypatch.setattr(session_module, "traits", counted)
    result = pytester.inline_run("--duplexact-model=silent", "--duplexact-action=wait",
                                 "--duplexact-limit=3", "--duplexact-run-dir=run",
                                 "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:asyncio",
                                 "-p", "no:benchmark")
    ran = [r for r in result.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert len(ran) >= 3 and len(calls) == 1
