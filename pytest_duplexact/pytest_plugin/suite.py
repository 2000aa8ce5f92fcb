"""The one test body every suite module shares (suites/test_<action>.py only names its action).

``DuplexactSession.pytest_generate_tests`` (session.py) parametrizes it over the selected instances of that
action, so the 24 condition suites are generated from the taxonomy, never copied.
"""

from __future__ import annotations

import pytest

from ..report.explain import explain
from ..data.results import InstanceOutcome, Verdict


def check(outcome: InstanceOutcome, run_dir) -> None:
    """Turn an outcome into the pytest outcome: miss = failed, excluded = skipped, not judged
    = passed (the report shows the stage as not judged)."""
    imm, sub = outcome.immediate, outcome.subsequent
    if imm.verdict is Verdict.EXCLUDED:
        pytest.skip(f"excluded trial: {imm.reason}")
    if imm.verdict is Verdict.FAILURE:
        pytest.fail(f"immediate execution failed: {imm.reason}\n{explain(outcome, run_dir)}",
                    pytrace=False)
    if sub is not None and sub.verdict is Verdict.FAILURE:
        pytest.fail(f"subsequent follow-through failed: {sub.reason}\n"
                    f"{explain(outcome, run_dir)}", pytrace=False)


def action_test(action: str):
    def test(duplexact_outcome, duplexact_harness):
        check(duplexact_outcome, duplexact_harness.run_dir)

    test.__name__ = test.__qualname__ = f"test_{action}"
    test.__doc__ = f"DuplexAct {action}: immediate execution, then subsequent follow-through."
    test._duplexact_action = action
    return pytest.mark.duplexact(test)
