"""The regression gate's decisions on synthetic reports (report/sections/baseline.py). Runs
built with ``start=`` other ids than their baseline are compared unpaired (the fallback); the
paired comparison has its own tests (test_paired.py)."""

from __future__ import annotations

import html
import json

import pytest

from pytest_duplexact.report.builder import passed
from pytest_duplexact.report.sections import baseline
from pytest_duplexact.report.views import html as html_view
from pytest_duplexact.report.views import markdown
from pytest_duplexact.report.views.terminal import render
from tests.report.helpers import outcome, outcomes_for, typed


def _run(delayed_ok: int, immediate_ok: int = 20, n: int = 20, start: int = 0, **settings):
    return typed(outcomes_for("take_turn.delayed", n, delayed_ok, start=start)
                  + outcomes_for("take_turn.immediate", n, immediate_ok, start=start),
                  **settings)


OTHER_IDS = 100  # ``start`` of a run on other instances than the baseline: unpaired


def test_identical_runs_do_not_fire():
    a = _run(15)
    sec = baseline.compare(a, a)
    assert sec["passed"] and sec["drops"] == []
    assert {r["target"] for r in sec["comparisons"]} == {
        "take_turn.I", "take_turn.delayed.I", "take_turn.immediate.I"}
    assert all(r["delta"] == 0 and r["p_value"] >= 0.5 for r in sec["comparisons"])
    assert sec["warnings"] == []
    assert sec["message"].startswith("passed baseline")


def test_significant_drop_on_one_condition_fires_and_says_where():
    sec = baseline.compare(_run(2, start=OTHER_IDS), _run(18))
    assert sec["pairing"] == "unpaired" and "instance sets differ" in sec["pairing_note"]
    assert not sec["passed"]
    assert sec["drops"] == ["take_turn.I", "take_turn.delayed.I"]
    row = next(r for r in sec["comparisons"] if r["target"] == "take_turn.delayed.I")
    assert row["delta"] == pytest.approx(-0.8)
    assert row["test"] == "z" and row["p_value"] < 1e-6
    assert row["baseline"]["n"] == row["current"]["n"] == 20
    untouched = next(r for r in sec["comparisons"] if r["target"] == "take_turn.immediate.I")
    assert not untouched["dropped"]
    assert "take_turn.delayed.I" in sec["message"]
    text = "\n".join(baseline.render_lines(sec))
    assert "take_turn.delayed.I: 90.0% -> 10.0% (-80.0 points; n 20 -> 20)" in text


def test_small_drop_within_chance_does_not_fire():
    sec = baseline.compare(_run(15, start=OTHER_IDS), _run(17))
    assert sec["passed"]
    row = next(r for r in sec["comparisons"] if r["target"] == "take_turn.delayed.I")
    assert row["delta"] < 0 and not row["dropped"] and row["test"] == "fisher"


def test_holm_correction_keeps_a_borderline_drop_from_firing():
    # one-sided Fisher p for 10/10 -> 5/10 is 0.016: significant alone, not after Holm
    # over 3 comparisons where the action-level p is larger
    cur = typed(outcomes_for("take_turn.delayed", 10, 5, start=OTHER_IDS)
                 + outcomes_for("take_turn.immediate", 10, 10, start=OTHER_IDS))
    base = typed(outcomes_for("take_turn.delayed", 10, 10)
                  + outcomes_for("take_turn.immediate", 10, 10))
    sec = baseline.compare(cur, base)
    row = next(r for r in sec["comparisons"] if r["target"] == "take_turn.delayed.I")
    assert row["p_value"] < 0.05 and row["p_adjusted"] >= 0.04
    assert baseline.compare(cur, base, alpha=0.2)["drops"]


def test_improvements_never_fire_and_S_is_compared():
    base = typed(outcomes_for("stop.direct_interruption", 30, 30, s_ok=lambda k: k < 27))
    cur = typed(outcomes_for("stop.direct_interruption", 30, 30, s_ok=lambda k: k < 10))
    sec = baseline.compare(cur, base)
    assert sec["drops"] == ["stop.S", "stop.direct_interruption.S"]
    assert baseline.compare(base, cur)["passed"]


def test_groups_missing_on_one_side_are_listed_not_failed():
    base = _run(15)
    cur = typed(outcomes_for("take_turn.delayed", 20, 15))
    sec = baseline.compare(cur, base)
    assert sec["passed"]
    assert {"target": "take_turn.immediate.I",
            "why": "measured in the baseline (n=20), not in this run"} in sec["not_compared"]


def test_warns_when_settings_differ():
    sec = baseline.compare(_run(15, transcriber="offline"), _run(15))
    assert any("transcriber" in w for w in sec["warnings"])
    sec = baseline.compare(_run(15, dataset_fingerprint="0" * 64), _run(15))
    assert any("dataset differs" in w for w in sec["warnings"])


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(baseline.BaselineError, match="no such file"):
        baseline.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(baseline.BaselineError, match="bad.json.*not a readable JSON"):
        baseline.load(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something-else"}))
    with pytest.raises(baseline.BaselineError, match="field 'schema'"):
        baseline.load(other)
    with pytest.raises(baseline.BaselineError, match="alpha"):
        baseline.compare(_run(1), _run(1), alpha=1.5)


def test_gate_turns_an_unreadable_baseline_into_a_failure(tmp_path):
    sec = baseline.gate(_run(15), str(tmp_path / "gone.json"))
    assert not sec["passed"] and "no such file" in sec["message"]


def test_terminal_shows_the_baseline_and_the_wide_marks():
    rep = _run(2, start=OTHER_IDS)
    rep = rep.replace(baseline=baseline.compare(rep, _run(18)))
    text = "\n".join(render(rep))
    assert "Baseline:" in text and "FAILED baseline" in text
    assert "dropped take_turn.delayed.I" in text
    # n = 20 at 10%: Wilson [2.8, 30.1] is wider than +/-10 points
    assert "10.0~" in text and "~ = 95% Wilson interval wider" in text


# --- a rate the baseline measured that this run no longer measures -----------------------------

def _gone_silent(start: int = 0):
    """The baseline measured stop (I and S); this run ran the same stop instances and every
    one was excluded (the model never spoke, so no cue met its speech)."""
    base = typed(outcomes_for("take_turn.delayed", 6, 6)
                 + outcomes_for("stop.direct_interruption", 6, 6, s_ok=lambda k: True))
    cur = typed(outcomes_for("take_turn.delayed", 6, 6, start=start)
                + [outcome("stop", "direct_interruption", start + k, None) for k in range(6)])
    return cur, base


@pytest.mark.parametrize("start", [0, OTHER_IDS], ids=["paired", "unpaired"])
def test_a_rate_no_longer_measured_fails_the_gate_and_says_what_it_was(start):
    cur, base = _gone_silent(start)
    sec = baseline.compare(cur, base, path="old.json")
    assert sec["drops"] == [] and not sec["passed"]
    assert [m["target"] for m in sec["not_measured_now"]] == [
        "stop.I", "stop.S", "stop.direct_interruption.I", "stop.direct_interruption.S"]
    assert sec["message"].startswith("FAILED baseline: 4 rate(s) measured in the baseline "
                                     "are not measured now (stop.I, stop.S")
    line = ("stop.direct_interruption.I: not measured now (was 100.0%, n 6); its 6 "
            "instance(s) ran and none was scored: 6 excluded (the cue never met model speech)")
    assert line in "\n".join(baseline.render_lines(sec))
    rep = cur.replace(baseline=sec)
    assert not passed(rep)  # the exit status
    md = markdown.render(rep)
    assert "**not measured now** (4; each fails the gate)" in md and line in md
    assert "stop.direct_interruption.I: no instance measured in both runs" not in md
    page = html_view.render(rep)
    assert html.escape(line) in page
    # duplexact compare A B: the run that lost it is B
    from pytest_duplexact.report.views.compare import render_lines as compare_lines

    said = compare_lines(sec, base, cur, "a.json", "b.json")
    assert "  " + line.replace("measured now", "measured in B") in said, said


def test_a_rate_with_no_instance_in_this_run_is_listed_in_every_view_not_failed():
    base, cur = _run(15), typed(outcomes_for("take_turn.delayed", 20, 15))
    sec = baseline.compare(cur, base)
    assert sec["passed"] and sec["not_measured_now"] == []
    line = "not compared: take_turn.immediate.I: measured in the baseline (n=20), not in this run"
    assert line in "\n".join(baseline.render_lines(sec))
    rep = cur.replace(baseline=sec)
    assert line[len("not compared: "):] in markdown.render(rep)
    assert html.escape(line) in html_view.render(rep)


def test_S_unmeasured_after_every_immediate_failure_says_so():
    base = typed(outcomes_for("stop.direct_interruption", 6, 6, s_ok=lambda k: True))
    cur = typed(outcomes_for("stop.direct_interruption", 6, 0, s_ok=lambda k: True))
    sec = baseline.compare(cur, base)
    assert [m["target"] for m in sec["not_measured_now"]] == [
        "stop.S", "stop.direct_interruption.S"]
    assert sec["not_measured_now"][0]["why"] == (
        "its 6 instance(s) ran and none was scored: 6 immediate failure(s) (no follow-through "
        "to judge)")
