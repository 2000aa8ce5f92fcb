"""DuplexAct ignore: one parametrized test over every selected ignore instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_ignore = action_test("ignore")
