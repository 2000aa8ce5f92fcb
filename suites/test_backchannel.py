"""DuplexAct backchannel: one parametrized test over every selected backchannel instance (all its conditions)."""

from pytest_duplexact.suite import action_test

test_backchannel = action_test("backchannel")
