"""report/sections/paper_comparison.py: coverage of the paper's 4,691 and per-condition tests against Table 16."""

from __future__ import annotations

import pytest

from pytest_duplexact.data import paper as paper_data
from pytest_duplexact.report.sections.paper_comparison import paper_section
from tests.report.helpers import outcomes_for, typed

KEY = "take_turn.immediate"


def _section(n: int, successes: int) -> dict:
    return paper_section(typed(outcomes_for(KEY, n, successes)))


def test_coverage_and_candor():
    sec = _section(40, 20)
    assert sec["covered"] == 40 and sec["paper_instances"] == 4691
    assert sec["candor_absent"] == 1235 and sum(sec["released_per_action"].values()) == 3456
    row = next(c for c in sec["coverage"] if (c["action"], c["condition"]) ==
               ("take_turn", "immediate"))
    p = paper_data.load()
    assert row["instances"] == 40
    assert row["paper_n_at_least"] == max(p.table16[m.name][KEY]["n_S"] for m in p.models)
    assert all(c["instances"] == 0 for c in sec["coverage"] if c is not row)
    # I only (no S measured without a judge), once per paper model with a value
    assert {r["metric"] for r in sec["comparisons"]} == {"I"}
    assert len(sec["comparisons"]) == sum(p.condition(m.name, KEY)["I"] is not None
                                          for m in p.models)


def test_a_large_gap_is_significant_after_holm_and_a_matching_rate_is_not():
    p = paper_data.load()
    rates = {m.name: p.condition(m.name, KEY)["I"] for m in p.models}
    best, worst = max(rates, key=rates.get), min(rates, key=rates.get)
    sec = _section(400, 0)  # 0% immediate success on 400 instances
    by_model = {r["model"]: r for r in sec["comparisons"]}
    assert by_model[best]["significant"] and by_model[best]["delta"] < 0
    assert by_model[best]["p_adjusted"] >= by_model[best]["p_value"]
    n = 400
    k = round(rates[worst] * n)  # the worst model's own rate: no difference
    sec = _section(n, k)
    row = {r["model"]: r for r in sec["comparisons"]}[worst]
    assert not row["significant"] and row["p_value"] > 0.5
    assert row["paper_n_is_lower_bound"] and row["run"] == pytest.approx(k / n)
