"""DuplexAct wait: one parametrized test over every selected wait instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_wait = action_test("wait")
