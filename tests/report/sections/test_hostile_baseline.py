"""A baseline is checked whole before the run starts, with the file and field named; one that
goes bad during the run fails the gate and never costs the run its own report."""

from __future__ import annotations

import copy
import json

import pytest

from pytest_duplexact.report.sections.baseline import BaselineError, gate, load
from tests.report.helpers import mixed_report, parsed

BROKEN = {  # what was done to the stored report -> the field the message names
    "non-numeric count": (lambda a: a["wait"]["counts"].__setitem__("n_I", "three"),
                          "summary.actions.wait.counts.n_I"),
    "negative n_I": (lambda a: a["take_turn"]["conditions"]["delayed"].__setitem__("n_I", -2),
                     "summary.actions.take_turn.conditions.delayed.n_I"),
    "null action": (lambda a: a.__setitem__("wait", None), "summary.actions.wait"),
    "null conditions": (lambda a: a["stop"].__setitem__("conditions", None),
                        "summary.actions.stop.conditions"),
    "more successes than n": (lambda a: a["wait"]["counts"].__setitem__("I_success", 99),
                              "summary.actions.wait.counts.I_success"),
    "bool count": (lambda a: a["wait"]["counts"].__setitem__("n_S", True),
                   "summary.actions.wait.counts.n_S"),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_a_broken_baseline_is_refused_at_load_naming_file_and_field(tmp_path, what):
    spoil, field = BROKEN[what]
    rep = mixed_report()
    spoil(rep["summary"]["actions"])
    path = tmp_path / "base.json"
    path.write_text(json.dumps(rep))
    with pytest.raises(BaselineError) as refused:
        load(path)
    assert str(path) in str(refused.value) and f"'{field}'" in str(refused.value)


def test_a_baseline_spoiled_mid_run_fails_the_gate_without_raising(tmp_path, monkeypatch):
    rep = mixed_report()
    path = tmp_path / "base.json"
    path.write_text(json.dumps(rep))
    load(path)  # fine at the start
    from pytest_duplexact.report.sections import baseline

    spoiled = copy.deepcopy(rep)  # replaced mid-run, read past load's checks
    spoiled["summary"]["actions"]["wait"]["counts"]["n_I"] = "three"
    # ... and an instance the paired comparison reads (same ids: the gate pairs them)
    spoiled["instances"][0]["immediate"] = "success"
    monkeypatch.setattr(baseline, "load", lambda p: spoiled)
    section = gate(parsed(rep), str(path))
    assert section["passed"] is False and str(path) in section["message"]
