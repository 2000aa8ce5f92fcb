"""The same recordings, data and settings give byte-identical JSON reports apart from
``created`` (docs/report-format.md, docs/runs.md): whatever the order the instances run in,
with or without pytest-xdist, and whichever run directory they are written to.

Runs the oracle (through tests/support/runs.py's test model) on a direct replay, a simulator replay
and a barge-in instance, so VAD spans, timings and aggregation all take part.
"""

from __future__ import annotations

import pytest

from tests.support.runs import (
    CONDITIONS,
    ORACLE,
    assert_same_report,
    comparable,
    read_report,
    runner,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return runner(tmp_path_factory)


def test_the_report_does_not_depend_on_the_run_directory(runs):
    base, _ = runs.baseline(ORACLE)
    text = comparable(base)
    assert str(runs.home) not in text and "baseline" not in text
    assert all(not i["recording"].startswith("/") for i in base["instances"])


def test_reversed_order_gives_the_same_report(runs, tmp_path):
    res = runs.run(ORACLE, f"--duplexact-run-dir={tmp_path}", "-p", "reverse_order", "-v")
    assert res.returncode == 0, res.stdout + res.stderr
    order = [ln.split("::")[0] for ln in res.stdout.splitlines() if " PASSED" in ln]
    assert len(order) == len(CONDITIONS) and order == sorted(order, reverse=True), res.stdout
    assert_same_report(read_report(tmp_path), runs.baseline(ORACLE)[0])


@pytest.mark.slow
def test_xdist_gives_the_same_report_as_a_serial_run(runs, tmp_path):
    res = runs.run(ORACLE, "-n", "2", f"--duplexact-run-dir={tmp_path}", "-v")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[gw0] " in res.stdout and "[gw1] " in res.stdout, "not both workers ran instances"
    assert_same_report(read_report(tmp_path), runs.baseline(ORACLE)[0])
