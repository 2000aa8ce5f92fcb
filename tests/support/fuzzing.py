"""What the hypothesis fuzz tests share: ``fuzz(n)`` runs ``n`` derandomized examples in CI
(the same ones every run), or ``DUPLEXACT_FUZZ_EXAMPLES`` examples with fresh random seeds
for a longer campaign."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG = int(os.environ.get("DUPLEXACT_FUZZ_EXAMPLES", "0"))


def fuzz(n: int):
    """``n`` examples in CI (derandomized: the same ones every run), or the campaign's count."""
    return settings(max_examples=LONG or n, deadline=None, database=None, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
