"""DuplexAct hold_floor: one parametrized test over every selected hold_floor instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_hold_floor = action_test("hold_floor")
