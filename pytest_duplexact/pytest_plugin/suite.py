"""The one test body every suite module shares (suites/test_<action>.py only names its action).

``DuplexactSession.pytest_generate_tests`` (session.py) parametrizes it over the selected instances of that
action, so the 24 condition suites are generated from the taxonomy, never copied.
"""

from __future__ import annotations

import pytest

from ..data.results import InstanceOutcome, Verdict
from ..report.explain import explain


class DuplexactMiss(pytest.fail.Exception):
    """A measured miss: the model did not do what the condition asks. Its own class so that a
    re-run plugin can tell it from an error (session.py: misses are never re-run)."""


def check(outcome: InstanceOutcome, run_dir) -> None:
    """Turn an outcome into the pytest outcome (README, "Outcomes"): green only for what was
    measured and passed.

    ====================================  ==============================================
    verdict                               pytest outcome
    ====================================  ==============================================
    I or S FAILURE                        failed (``DuplexactMiss``), never re-run
    I EXCLUDED (cue met no model speech)  skipped: "excluded trial: ..."
    I NOT_JUDGED (I itself needs judges)  skipped: "not judged: ..."
    I NOT_APPLICABLE                      skipped: "not applicable: ..."
    I SUCCESS, S SUCCESS or not judged    passed (an unjudged S is reported as such)
    JUDGE_ERROR, model or harness crash   error (raised before this check)
    ====================================  ==============================================
    """
    imm, sub = outcome.immediate, outcome.subsequent
    if imm.verdict is Verdict.EXCLUDED:
        pytest.skip(f"excluded trial: {imm.reason}")
    if imm.verdict is Verdict.NOT_JUDGED:
        pytest.skip(f"not judged: {imm.reason}")
    if imm.verdict is Verdict.NOT_APPLICABLE:
        pytest.skip(f"not applicable: {imm.reason}")
    if imm.verdict is Verdict.FAILURE:
        raise DuplexactMiss(msg=f"immediate execution failed: {imm.reason}\n"
                                f"{explain(outcome, run_dir)}", pytrace=False)
    if sub is not None and sub.verdict is Verdict.FAILURE:
        raise DuplexactMiss(msg=f"subsequent follow-through failed: {sub.reason}\n"
                                f"{explain(outcome, run_dir)}", pytrace=False)


def action_test(action: str):
    def test(duplexact_outcome, duplexact_harness):
        check(duplexact_outcome, duplexact_harness.run_dir)

    test.__name__ = test.__qualname__ = f"test_{action}"
    test.__doc__ = f"DuplexAct {action}: immediate execution, then subsequent follow-through."
    test._duplexact_action = action
    return pytest.mark.duplexact(test)
