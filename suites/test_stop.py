"""DuplexAct stop: one parametrized test over every selected stop instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_stop = action_test("stop")
