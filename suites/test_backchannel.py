"""DuplexAct backchannel: one parametrized test over every selected backchannel instance (all its conditions)."""

from pytest_duplexact.pytest_plugin.suite import action_test

test_backchannel = action_test("backchannel")
