"""report/stats.py against published and hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.report.stats import (
    Rate,
    drop_test,
    fisher_drop,
    holm,
    rate_of,
    small_sample,
    wilson,
    z_test_drop,
)


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
# method 3 (Wilson score interval without continuity correction).
@pytest.mark.parametrize("k,n,lo,hi", [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_newcombe(k, n, lo, hi):
    got = wilson(k, n)
    assert got[0] == pytest.approx(lo, abs=5e-5)
    assert got[1] == pytest.approx(hi, abs=5e-5)


def test_wilson_closed_form_cases():
    # 5/10: centre 0.5, half-width z/(1+z^2/n) * sqrt(0.025 + z^2/400)
    z = 1.959963984540054
    half = z / (1 + z * z / 10) * math.sqrt(0.025 + z * z / 400)
    assert wilson(5, 10) == pytest.approx((0.5 - half, 0.5 + half))
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-5)
    # all successes: upper bound exactly 1, lower n / (n + z^2)
    assert wilson(3, 3) == (pytest.approx(3 / (3 + z * z)), 1.0)
    assert wilson(0, 3)[0] == 0.0
    assert wilson(0, 0) is None


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError, match="successes"):
        wilson(4, 3)
    with pytest.raises(ValueError):
        wilson(-1, 3)


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_rate_and_stays_in_unit_interval(kn):
    k, n = kn
    iv = wilson(k, n)
    if n == 0:
        assert iv is None
        return
    assert 0.0 <= iv[0] <= k / n <= iv[1] <= 1.0


def test_rate_width_marks_small_samples():
    assert Rate(3, 3).wide  # [43.9, 100]
    assert not Rate(0, 0).wide and Rate(0, 0).value is None
    # 400 at 50%: half-width 4.9 points; 90 at 50%: 10.1 points
    assert not Rate(200, 400).wide
    assert Rate(45, 90).wide
    assert not Rate(48, 96).wide  # 9.9 points
    # Wilson is asymmetric: the wider side decides
    r = Rate(95, 100)
    assert r.half_width == pytest.approx(max(0.95 - r.lo, r.hi - 0.95))


def test_rate_of_report_counts():
    c = {"n": 10, "n_I": 8, "I_success": 6, "n_S": 6, "S_success": 3}
    assert rate_of(c, "I") == Rate(6, 8)
    assert rate_of(c, "S") == Rate(3, 6)
    assert rate_of(None, "I") == Rate(0, 0)
    with pytest.raises(ValueError):
        rate_of(c, "T")


def test_z_test_known_value():
    # 90/100 -> 80/100: pooled p 0.85, se sqrt(.85*.15*.02) = 0.050498, z = 1.9803
    assert z_test_drop(90, 100, 80, 100) == pytest.approx(0.02383, abs=1e-5)
    assert z_test_drop(80, 100, 90, 100) == pytest.approx(1 - 0.02383, abs=1e-5)
    assert z_test_drop(100, 100, 100, 100) == 1.0  # no variance, no drop


def test_fisher_known_values():
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: one-sided p = 17/70
    assert fisher_drop(3, 4, 1, 4) == pytest.approx(17 / 70)
    # all 3 -> none of 3: 1 / C(6, 3)
    assert fisher_drop(3, 3, 0, 3) == pytest.approx(1 / 20)
    assert fisher_drop(9, 9, 0, 9) == pytest.approx(1 / math.comb(18, 9))
    # equal rates are no evidence of a drop: P(X <= observed) includes the mode
    assert fisher_drop(2, 5, 2, 5) > 0.5
    assert fisher_drop(0, 5, 5, 5) == pytest.approx(1.0)


def test_fisher_agrees_with_scipy_where_available():
    stats = pytest.importorskip("scipy.stats")
    for kb, nb, kc, nc in [(7, 12, 2, 9), (40, 50, 30, 45), (1, 3, 0, 4), (5, 5, 4, 6)]:
        ref = stats.fisher_exact([[kb, nb - kb], [kc, nc - kc]], alternative="greater").pvalue
        assert fisher_drop(kb, nb, kc, nc) == pytest.approx(ref, rel=1e-9)


def test_drop_test_switches_on_expected_counts():
    assert small_sample(3, 3, 0, 3)
    assert drop_test(3, 3, 0, 3)[0] == "fisher"
    assert not small_sample(90, 100, 80, 100)
    assert drop_test(90, 100, 80, 100) == ("z", pytest.approx(0.02383, abs=1e-5))
    with pytest.raises(ValueError, match="baseline"):
        drop_test(1, 0, 1, 2)


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
