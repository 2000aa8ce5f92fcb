"""The paired comparison (report/paired.py, the paired half of report/stats.py): McNemar's
exact test against scipy, Newcombe's interval against a published value, the pairing and the
flips on synthetic reports, and the views of a paired baseline section."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.results import InstanceOutcome
from pytest_duplexact.report import paired
from pytest_duplexact.report.sections import baseline
from pytest_duplexact.report.stats import mcnemar_exact, paired_difference
from pytest_duplexact.report.views.compare_page import render as render_page
from pytest_duplexact.report.views.markdown import render as render_markdown
from tests.report.helpers import (
    outcome,
    outcomes_for,
    parsed,
    report,
    scipy_mcnemar,
    write_run_dir,
)

# --- the statistics ----------------------------------------------------------------------------

@pytest.mark.parametrize("worse", range(0, 26, 3))
@pytest.mark.parametrize("better", range(0, 26, 4))
def test_mcnemar_exact_equals_scipys_two_sided_binomial_test(worse, better):
    expected = scipy_mcnemar(worse, better)
    assert mcnemar_exact(worse, better) == pytest.approx(expected, rel=1e-12, abs=0)
    assert mcnemar_exact(worse, better) == mcnemar_exact(better, worse)


def test_mcnemar_exact_is_exact_far_out_in_the_tail():
    # 400 flips all one way: 2 / 2**400, far below what a float sum of terms would keep
    assert mcnemar_exact(400, 0) == pytest.approx(2.0 ** -399, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_newcombe_interval_matches_the_published_example():
    # Cavo et al. (2012) in Fagerland, Lydersen & Laake, Statistical Analysis of Contingency
    # Tables (2017), ch. 8: [[59, 6], [16, 80]], Newcombe square-and-add
    # -0.0621 (95% CI -0.1186 to -0.0046)
    lo, hi = paired_difference(both=59, better=6, worse=16, neither=80)
    assert (round(lo, 4), round(hi, 4)) == (-0.1186, -0.0046)
    assert paired_difference(0, 0, 0, 0) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_newcombe_interval_holds_the_estimate_within_bounds(both, worse, better, neither):
    n = both + worse + better + neither
    got = paired_difference(both, worse, better, neither)
    if n == 0:
        assert got is None
        return
    lo, hi = got
    d = (better - worse) / n
    assert -1.0 <= lo <= d + 1e-12 and d - 1e-12 <= hi <= 1.0
    # swapping the runs mirrors the interval
    lo2, hi2 = paired_difference(both, better, worse, neither)
    assert (lo2, hi2) == pytest.approx((-hi, -lo), abs=1e-12)


# --- pairing and flips -------------------------------------------------------------------------

def _pair_reports():
    """take_turn.delayed: 10 instances, 8 -> 3 successes with one improvement; stop: S judged
    on 4 instances in both runs, one S flip, and one instance whose I flipped (no S pair)."""
    base = outcomes_for("take_turn.delayed", 10, 8)
    cur = [outcome("take_turn", "delayed", k, k in (0, 1, 9)) for k in range(10)]
    base += [outcome("stop", "direct_interruption", k, True, True) for k in range(5)]
    cur += [outcome("stop", "direct_interruption", k, k != 4, k != 2) for k in range(5)]
    return report(cur, model="new"), report(base, model="old")


def test_paired_rows_count_discordant_pairs_and_flips_name_both_reasons():
    cur, base = _pair_reports()
    sec = baseline.compare(parsed(cur), parsed(base), alpha=0.05, path="old.json")
    assert sec["pairing"] == "paired" and sec["method"] == paired.METHOD
    row = {r["target"]: r for r in sec["comparisons"]}
    tt = row["take_turn.delayed.I"]
    assert tt["discordant"] == {"worse": 6, "better": 1} and tt["pairs"] == 10
    assert tt["delta"] == pytest.approx(-0.5)
    assert (tt["baseline"]["successes"], tt["current"]["successes"]) == (8, 3)
    assert tt["p_value"] == pytest.approx(scipy_mcnemar(6, 1), rel=1e-12)
    assert tt["ci"] == list(paired_difference(both=2, worse=6, better=1, neither=1))
    # S: instance 4 lost its I success, so only 4 S pairs; instance 2's S flipped
    s = row["stop.direct_interruption.S"]
    assert s["pairs"] == 4 and s["discordant"] == {"worse": 1, "better": 0}
    assert s["unpaired"] == 1
    flips = {(f["id"], f["metric"]): f for f in sec["flips"]}
    assert len(flips) == 6 + 1 + 1 + 1  # take_turn 6 worse + 1 better, stop one I, one S
    up = flips[("take_turn-delayed-casual-09", "I")]
    assert up["direction"] == "failure->success"
    assert up["baseline_reason"] == "immediate failure (take_turn-delayed-casual-09)"
    assert up["current_reason"] == "immediate success (take_turn-delayed-casual-09)"
    sflip = flips[("stop-direct_interruption-interview-02", "S")]
    assert sflip["direction"] == "success->failure"
    assert "kept" in sflip["baseline_reason"] and "broke" in sflip["current_reason"]
    assert [f["action"] for f in sec["flips"]][:7] == ["take_turn"] * 7  # taxonomy order
    # Holm over every comparison, as unpaired
    ps = [r["p_value"] for r in sec["comparisons"]]
    assert [r["p_adjusted"] for r in sec["comparisons"]] == baseline.holm(ps)


def test_the_verdict_names_what_it_compared_against_and_warns_on_other_models_and_data():
    cur, base = _pair_reports()
    sec = baseline.compare(parsed(cur), parsed(base))
    assert f"against old ({base['created']}, dataset ffffffffffff)" in sec["message"]
    assert sec["dataset_fingerprint"] == "f" * 64
    assert any("the models differ (baseline old, this run new)" in w for w in sec["warnings"])
    other = report(InstanceOutcome.from_dict(d) for d in cur["instances"])
    other["model"] = "old"
    other["settings"]["dataset_fingerprint"] = "0" * 64
    sec = baseline.compare(parsed(other), parsed(base))
    assert not any("models differ" in w for w in sec["warnings"])
    assert any("the dataset differs" in w for w in sec["warnings"])


def test_other_instance_sets_fall_back_to_the_unpaired_tests_and_say_so():
    cur, base = _pair_reports()
    cur["instances"] = cur["instances"][1:]
    sec = baseline.compare(parsed(cur), parsed(base))
    assert sec["pairing"] == "unpaired" and sec["flips"] == []
    assert "instance sets differ (0 only in this run, 1 only in the baseline, 14 in both)" \
        in sec["pairing_note"]
    assert {r["test"] for r in sec["comparisons"]} <= {"fisher", "z"}
    assert "(unpaired; alpha 0.05" in sec["message"]


def test_a_malformed_instance_is_a_baseline_error_naming_it():
    cur, base = _pair_reports()
    base["instances"][0]["immediate"]["verdict"] = "perhaps"
    with pytest.raises(baseline.BaselineError, match="baseline report: instance "
                       "'stop-direct_interruption-casual-00'"):
        baseline.compare(parsed(cur), parsed(base))


# --- the views ---------------------------------------------------------------------------------

def test_terminal_and_markdown_show_the_pairing_the_interval_and_the_flips():
    cur, base = _pair_reports()
    cur["baseline"] = baseline.compare(parsed(cur), parsed(base), path="old.json")
    text = "\n".join(baseline.render_lines(cur["baseline"]))
    assert "paired on the 15 instance(s) both runs share" in text
    assert "9 flip(s): 8 success->failure, 1 failure->success" in text
    assert ('take_turn-delayed-meeting-04 I success->failure: was "immediate success '
            '(take_turn-delayed-meeting-04)"; now "immediate failure') in text
    md = render_markdown(parsed(cur))
    assert "Comparison: paired on the 15 instance(s)" in md
    assert "-50.0 points [95% CI " in md and "10 pairs: 6 worse, 1 better" in md
    assert "<summary>9 flipped instance(s)</summary>" in md


def test_comparison_page_shows_each_flip_from_both_runs_side_by_side(tmp_path):
    cur, base = _pair_reports()
    a = write_run_dir(tmp_path / "a", base, seconds=1.0)
    b = write_run_dir(tmp_path / "b", cur, seconds=1.0)
    sec = baseline.compare(parsed(cur), parsed(base), path=str(a))
    page = render_page(sec, parsed(base), parsed(cur), a_path=a, b_path=b,
                       out_path=tmp_path / "c.html", audio="link")
    for s in ("summary", "deltas", "flips"):
        assert f'<section id="{s}">' in page
    assert page.count('<div class="pair">') == len(sec["flips"]) == 9
    assert page.count('class="lanes"') == 2 * 9  # both runs' lanes for every flip
    assert 'src="a/instances/take_turn-delayed-meeting-04/input.wav"' in page
    assert 'src="b/instances/take_turn-delayed-meeting-04/input.wav"' in page
    assert "95% Newcombe interval" in page  # the forest plot's axis
    assert "the models differ" in page
    json.dumps(sec)  # the section is plain JSON
