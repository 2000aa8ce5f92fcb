"""DuplexAct take_turn: one parametrized test over every selected take_turn instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_take_turn = action_test("take_turn")
