"""Latency as a distribution and the no-response rate: the trial's values (rules/trial_latency.py),
their aggregate (p10 / p50 / p90, n, silent / trials), the terminal's table and the gates."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import ImmediateResult, InstanceOutcome, Verdict
from pytest_duplexact.report import lookup
from pytest_duplexact.report.aggregate import Latency, aggregate
from pytest_duplexact.report.sections import gates
from pytest_duplexact.report.views.terminal import latency_table
from pytest_duplexact.rules.trial_latency import onset_latency, responded
from tests.report.helpers import outcome, parsed, report
from tests.support.builders import make_instance, seg, timeline


def _timed(k: int, latency: float | None, responded: bool | None = True,
           condition: str = "delayed") -> InstanceOutcome:
    o = outcome("take_turn", condition, k, latency is not None)
    return dataclasses.replace(o, latency=latency, responded=responded)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(-3, 10, allow_nan=False), min_size=1, max_size=40),
       silent=st.integers(0, 5))
def test_percentiles_are_numpys_and_silent_trials_are_apart(values, silent):
    outs = [_timed(k, v) for k, v in enumerate(values)]
    outs += [_timed(100 + k, None, responded=False) for k in range(silent)]
    lat = aggregate(outs).actions["take_turn"].latency
    assert lat.n == len(values)
    for q, got in ((10, lat.p10), (50, lat.p50), (90, lat.p90)):
        assert got == pytest.approx(float(np.percentile(values, q)), abs=1e-6)
    assert (lat.trials, lat.silent) == (len(values) + silent, silent)
    assert lat.no_response == pytest.approx(silent / (len(values) + silent))
    assert Latency.from_dict(lat.to_dict()) == lat


def test_errors_and_old_outcomes_stay_out():
    err = outcome("take_turn", "delayed", 9, None, error="RuntimeError: boom")
    old = outcome("wait", "inter_sentential_pause", 1, True)  # stored before the fields
    agg = aggregate([_timed(0, 0.5), err, old])
    assert agg.actions["take_turn"].latency.n == 1
    assert agg.actions["take_turn"].latency.trials == 1
    assert agg.actions["wait"].latency is None
    assert "latency" not in agg.actions["wait"].to_dict()  # its report keeps its bytes


def test_stop_uses_its_diagnostic():
    outs = [dataclasses.replace(outcome("stop", "direct_interruption", k, True, timing=t),
                                responded=True) for k, t in enumerate((0.2, 0.4, 0.6))]
    lat = aggregate(outs).actions["stop"].latency
    assert (lat.n, lat.p50) == (3, pytest.approx(0.4))


def test_onset_latency_of_take_turn_and_backchannel(tmp_path):
    inst = make_instance(tmp_path, "take_turn", "delayed", {}, {"user_start": 0.5,
                                                               "user_end": 3.0})
    imm = ImmediateResult(Verdict.SUCCESS, "", window=(3.0, 6.0), onset=3.8)
    assert onset_latency(inst, imm) == pytest.approx(0.8)
    assert onset_latency(inst, ImmediateResult(Verdict.FAILURE, "no speech")) is None
    bc = make_instance(tmp_path, "backchannel", "affirmative", {},
                       {"user_start": 0.5, "user_end": 3.0, "backchannel_point": 1.5})
    assert onset_latency(bc, dataclasses.replace(imm, onset=1.7)) == pytest.approx(0.2)


def test_responded_needs_substantive_speech():
    assert responded(timeline(seg(1.0, 2.5, "sure let me help you with that")))
    assert not responded(timeline())


def test_terminal_and_gates():
    outs = [_timed(k, 0.5 + 0.1 * k) for k in range(10)] + [_timed(20, None, False)]
    rep = report(outs)
    text = "\n".join(latency_table(parsed(rep)))
    assert "Take Turn / Delayed" in text and "9% (1/11)" in text
    get = lookup(parsed(rep))
    p90 = gates.evaluate(gates.parse("take_turn.p90<=1.4"), get)
    assert p90.passed and p90.value == pytest.approx(np.percentile([0.5 + 0.1 * k
                                                                    for k in range(10)], 90))
    nr = gates.evaluate(gates.parse("take_turn.delayed.no_response<5%"), get)
    assert not nr.passed and "9.1%" in nr.message
    missing = gates.evaluate(gates.parse("stop.p50<=1"), get)
    assert not missing.passed and "not measured" in missing.message


@pytest.mark.parametrize("expr, says", [
    ("wait.p90<=1", "wait has no latency"), ("take_turn.p50<=50%", "in seconds, not %"),
    ("take_turn.no_response<=2", "a rate bound"),
])
def test_bad_latency_gates(expr, says):
    with pytest.raises(gates.GateError, match=says):
        gates.parse(expr)


def test_compare_shows_median_latency_deltas_with_n(tmp_path, capsys):
    """``duplexact compare``: per action and condition, each run's p50 with its n, the change
    B - A and the no-response rates, in the terminal and on the HTML page."""
    import json

    from pytest_duplexact.cli import main as duplexact
    from pytest_duplexact.report.views.latency_rows import deltas

    a = report([_timed(k, 0.4 + 0.1 * k) for k in range(5)])  # p50 0.6
    b = report([_timed(k, 1.0 + 0.1 * k) for k in range(4)]  # p50 1.15, one silent trial
               + [_timed(4, None, responded=False)], channel="phone")
    found = {(d["action"], d["condition"]): d for d in deltas(parsed(a), parsed(b))}
    assert set(found) == {("take_turn", None), ("take_turn", "delayed")}
    d = found[("take_turn", "delayed")]
    assert (d["a"]["n"], d["b"]["n"], d["b"]["no_response"]) == (5, 4, 0.2)
    assert d["delta_p50"] == pytest.approx(0.55)
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    duplexact(["compare", str(pa), str(pb), "--html", str(tmp_path / "c.html")])
    out = capsys.readouterr().out
    assert "Latency per action and condition" in out
    row = next(line for line in out.splitlines() if "Take Turn / Delayed" in line
               and "+0.55" in line)
    assert "0.60 (5)" in row and "1.15 (4)" in row and "0% / 20%" in row
    page = (tmp_path / "c.html").read_text()
    assert "<h3>Latency</h3>" in page and "+0.55" in page and "1.15 (4)" in page


def test_the_html_timing_chart_draws_p10_and_p90():
    """The timing chart marks each condition's p10 and p90 (report.json ``condition_latency``)
    beside the instances' dots and the paper's medians."""
    import re

    from pytest_duplexact.report.views.charts import timings_chart

    values = [0.2 + 0.1 * k for k in range(10)]
    outs = [dataclasses.replace(outcome("stop", "direct_interruption", k, True, timing=v),
                                responded=True) for k, v in enumerate(values)]
    outs.append(dataclasses.replace(outcome("recover", "revise", 0, True, timing=0.5),
                                    responded=True))
    rep = report(outs)
    lat = rep["summary"]["actions"]["stop"]["condition_latency"]["direct_interruption"]
    assert lat["p10"] == pytest.approx(np.percentile(values, 10))
    svg = timings_chart(parsed(rep))
    for q in ("p10", "p90"):
        for key in ("stop-direct_interruption", "recover-revise"):
            group = re.search(rf'<g id="latency-{q}-{key}">(.*?)</g>', svg, re.S)
            assert group is not None and ("<use" in group[1] or "<path" in group[1])
    assert "p10 and p90" in svg
    # no latency measured in a condition: no marks for it
    assert "latency-p10-recover-repeat" not in svg
