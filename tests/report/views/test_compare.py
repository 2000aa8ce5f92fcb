"""User level: an oracle run and an endpoint run of the bundled set (four conditions, three
where the cascade baseline fails and one where it does not: to stay fast), compared instance
by instance, by the gate of the endpoint run (``--duplexact-baseline``) and by ``duplexact
compare A B --html``. The flips are listed and every exact McNemar p-value equals scipy's."""

from __future__ import annotations

import json
import re

import pytest

# The VAD's native modules, imported once here (see test_runs.py: an in-process pytester run
# drops the modules it imported, and torch cannot be imported twice into one process).
import silero_vad  # noqa: F401
import torch  # noqa: F401
from scipy.stats import binomtest

from pytest_duplexact.cli import main as duplexact
from tests.report.helpers import scipy_mcnemar

SELECTION = ("--duplexact-condition=take_turn.immediate,take_turn.delayed,hold_floor.continue,"
             "interrupt.help", "-p", "no:cacheprovider", "-q")


def _scipy_p(row: dict) -> float:
    return scipy_mcnemar(row["discordant"]["worse"], row["discordant"]["better"])


def test_compare_an_oracle_run_with_an_endpoint_run(pytester, capsys):
    res = pytester.runpytest("--duplexact-model=oracle", "--duplexact-run-dir=oracle",
                             *SELECTION)
    res.assert_outcomes(passed=12)
    a = pytester.path / "oracle" / "report.json"
    res = pytester.runpytest("--duplexact-model=endpoint", "--duplexact-run-dir=endpoint",
                             f"--duplexact-baseline={a}", *SELECTION)
    res.assert_outcomes(passed=3, failed=9)
    b = pytester.path / "endpoint" / "report.json"
    gate = json.loads(b.read_text())["baseline"]
    assert gate["pairing"] == "paired" and gate["drops"] == []  # 3 a condition: no power
    # 9 successes lost, none significant at 3 a condition: too few to tell, never a pass
    res.stdout.fnmatch_lines(["*too few to tell: 6 of 7 comparison(s) lower on too few "
                              "instances to show any drop (*); no significant drop against "
                              "oracle (*paired*",
                              "*9 flip(s): 9 success->failure, 0 failure->success*"])

    page = pytester.path / "compare.html"
    capsys.readouterr()
    code = duplexact(["compare", str(a), str(b), "--html", str(page), "--audio", "none"])
    out = capsys.readouterr().out
    assert code == 0
    assert "paired on the 12 instance(s) both runs share" in out
    assert "warning: the models differ (baseline oracle, this run endpoint)" in out
    # every flip is listed with both runs' reasons: take_turn immediate (the endpoint answers
    # 0.7 s after the user), hold_floor (it falls silent), interrupt (it waits its turn)
    flips = re.findall(r"^  (\S+) I success->failure: was \"(.+)\"; now \"(.+)\"$", out, re.M)
    assert len(flips) == 9 == len(gate["flips"])
    assert [f[0] for f in flips] == [f["id"] for f in gate["flips"]]
    assert {i.rsplit("-", 2)[0] for i, _, _ in flips} == {
        "take_turn-immediate", "hold_floor-continue", "interrupt-help"}
    assert all("inside" in was and "outside" in now
               for i, was, now in flips if i.startswith("take_turn-"))
    # the exact McNemar p-values, as stored and as printed, are scipy's
    rows = {r["target"]: r for r in gate["comparisons"]}
    assert rows["take_turn.I"]["discordant"] == {"worse": 3, "better": 0}
    assert rows["take_turn.delayed.I"]["discordant"] == {"worse": 0, "better": 0}
    for row in gate["comparisons"]:
        assert row["p_value"] == pytest.approx(_scipy_p(row), rel=1e-12)
        line = next(ln for ln in out.splitlines() if ln.startswith(row["target"] + " "))
        assert f"  {_scipy_p(row):.3g}  " in line
    assert rows["hold_floor.I"]["p_value"] == binomtest(3, 3, 0.5).pvalue == 0.25

    html = page.read_text()
    assert html.count('<div class="pair">') == 9
    assert html.count('class="lanes"') == 18  # both runs' lanes for every flip
    assert 'id="flip-hold_floor-continue-casual-01-I"' in html
