"""DuplexAct recover: one parametrized test over every selected recover instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_recover = action_test("recover")
