"""DuplexAct interrupt: one parametrized test over every selected interrupt instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_interrupt = action_test("interrupt")
