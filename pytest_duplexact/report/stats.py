"""Uncertainty of the report's rates, pure: Wilson score intervals, one-sided tests for a
drop between two runs, and the paired statistics of two runs on the same instances (McNemar's
exact test, Newcombe's interval for a paired difference). No I/O, no numpy; every function
takes counts and returns numbers.

Why Wilson: the benchmark's rates sit near 0 and 1 and many cells have small n (the bundled
fixtures have 3 instances a condition); the Wald interval collapses to zero width there, the
Wilson score interval (Wilson 1927; Newcombe 1998, method 3) does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # two-sided 95%: the normal quantile at 0.975
WIDE_HALF_WIDTH = 0.10  # an interval wider than +/- 10 points is marked '~' in the views


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for ``successes / n`` (no continuity correction); ``None`` when
    ``n == 0`` (nothing measured, no interval)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson: need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # exact bounds at the extremes (rounding would otherwise give 1e-17 instead of 0)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


@dataclass(frozen=True)
class Rate:
    """A success rate with its sample size and 95% Wilson interval (all ``None`` at n = 0)."""

    successes: int
    n: int

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.successes, self.n)

    @property
    def lo(self) -> float | None:
        iv = self.interval
        return None if iv is None else iv[0]

    @property
    def hi(self) -> float | None:
        iv = self.interval
        return None if iv is None else iv[1]

    @property
    def half_width(self) -> float | None:
        """The larger distance from the rate to an interval end (Wilson is asymmetric)."""
        iv = self.interval
        return None if iv is None else max(self.value - iv[0], iv[1] - self.value)

    @property
    def wide(self) -> bool:
        """Wider than +/- 10 points: read the rate as a rough indication only."""
        hw = self.half_width
        return hw is not None and hw > WIDE_HALF_WIDTH + 1e-12

    def to_dict(self) -> dict:
        return {"successes": self.successes, "n": self.n, "rate": self.value,
                "lo": self.lo, "hi": self.hi}


def rate_of(counts: dict | None, metric: str) -> Rate:
    """The I or S rate of a report ``Counts`` dict (docs/report-format.md)."""
    if metric not in ("I", "S"):
        raise ValueError(f"metric must be 'I' or 'S', got {metric!r}")
    if counts is None:
        return Rate(0, 0)
    return Rate(int(counts[f"{metric}_success"]), int(counts[f"n_{metric}"]))


# --- Was there a drop? -------------------------------------------------------------------------

def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def z_test_drop(k_base: int, n_base: int, k_cur: int, n_cur: int) -> float:
    """One-sided pooled two-proportion z-test of H1: p_cur < p_base; returns the p-value.

    With every success or every failure in both runs the pooled variance is 0 and the rates
    are equal: p = 1 (nothing dropped)."""
    _check(k_base, n_base, k_cur, n_cur)
    p_pool = (k_base + k_cur) / (n_base + n_cur)
    se = math.sqrt(p_pool * (1 - p_pool) * (1 / n_base + 1 / n_cur))
    if se == 0.0:
        return 1.0
    z = (k_base / n_base - k_cur / n_cur) / se
    return normal_sf(z)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_drop(k_base: int, n_base: int, k_cur: int, n_cur: int) -> float:
    """One-sided Fisher exact test of H1: p_cur < p_base; returns the p-value.

    Conditional on the total successes K, the current run's successes are hypergeometric; the
    p-value is P(X <= k_cur), the chance of a current run at least this bad under equal
    rates."""
    _check(k_base, n_base, k_cur, n_cur)
    total, n = k_base + k_cur, n_base + n_cur
    lo = max(0, total - n_base)
    log_denom = _log_comb(n, n_cur)
    p = sum(math.exp(_log_comb(total, x) + _log_comb(n - total, n_cur - x) - log_denom)
            for x in range(lo, k_cur + 1))
    return min(1.0, p)


def _check(k_base, n_base, k_cur, n_cur) -> None:
    for k, n, which in ((k_base, n_base, "baseline"), (k_cur, n_cur, "current")):
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"{which}: need 0 <= successes <= n and n > 0, got {k} of {n}")


def small_sample(k_base: int, n_base: int, k_cur: int, n_cur: int) -> bool:
    """The normal approximation's usual condition fails: an expected count of successes or
    failures below 5 in either run (under the pooled rate)."""
    p = (k_base + k_cur) / (n_base + n_cur)
    return min(n * q for n in (n_base, n_cur) for q in (p, 1 - p)) < 5


def drop_test(k_base: int, n_base: int, k_cur: int, n_cur: int) -> tuple[str, float]:
    """``("fisher" | "z", p)``: Fisher's exact test for small samples (see small_sample),
    the pooled z-test otherwise."""
    if small_sample(k_base, n_base, k_cur, n_cur):
        return "fisher", fisher_drop(k_base, n_base, k_cur, n_cur)
    return "z", z_test_drop(k_base, n_base, k_cur, n_cur)


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given): comparing each with alpha
    controls the chance of any false alarm across the whole family at alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# --- Two runs on the same instances (paired) ---------------------------------------------------

def mcnemar_exact(worse: int, better: int) -> float:
    """McNemar's exact test: the two-sided p-value of the discordant pairs under H0 "either
    direction is as likely" (``worse`` success -> failure, ``better`` failure -> success), the
    conditional binomial test with p = 1/2. Exact integer arithmetic; 1.0 when nothing
    flipped."""
    if worse < 0 or better < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got {worse}, {better}")
    n = worse + better
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(worse, better) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def paired_difference(both: int, worse: int, better: int, neither: int,
                      z: float = Z95) -> tuple[float, float] | None:
    """95% interval of (current rate - baseline rate) on paired trials: Newcombe's hybrid
    score interval (Newcombe 1998, Stat Med 17:2635, method 10; "square-and-add"): each
    run's Wilson interval, combined with the correlation of the pairs. ``both`` / ``neither``
    succeeded / failed in both runs; ``worse`` succeeded in the baseline only, ``better`` in
    the current run only. ``None`` when there is no pair."""
    for k in (both, worse, better, neither):
        if k < 0:
            raise ValueError(f"paired_difference: counts must be >= 0, got "
                             f"{(both, worse, better, neither)}")
    n = both + worse + better + neither
    if n == 0:
        return None
    p_cur, p_base = (both + better) / n, (both + worse) / n
    l_cur, u_cur = wilson(both + better, n, z)
    l_base, u_base = wilson(both + worse, n, z)
    margins = (both + better) * (worse + neither) * (both + worse) * (better + neither)
    phi = 0.0
    if margins:  # the phi coefficient, its positive part shrunk by n/2 (Newcombe's correction)
        a = both * neither - better * worse
        phi = (a - n / 2 if a > n / 2 else 0.0 if a >= 0 else a) / math.sqrt(margins)
    d = p_cur - p_base

    def half(x: float, y: float) -> float:
        return math.sqrt(max(0.0, x * x + y * y - 2 * phi * x * y))

    lo = d - half(p_cur - l_cur, u_base - p_base)
    hi = d + half(p_base - l_base, u_cur - p_cur)
    return max(-1.0, lo), min(1.0, hi)
