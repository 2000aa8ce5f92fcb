"""The run's timing integrity: how late the harness itself was on its wall-clock
trials, from each outcome's ``clock`` (pipelines/clock.py). Only streaming runs have it, so a
stepped run's report keeps its bytes. Every view says it in the same words (``line``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...data.results import worst_lag_ms as worst_ms

FOUND = object()  # section's tolerance when the caller knows none: the largest the clocks say


def section(outcomes: Iterable, tolerance_ms=FOUND) -> dict | None:
    """report.json's ``clock``: trials measured, re-run, unreliable, the worst lag (ms) of
    all trials and of the scored ones, and the tolerance; None when no trial had a clock.
    ``tolerance_ms``: the reporting run's (None: off), whatever tolerance a resumed or merged
    trial ran under; its scored trials were judged against it (run/journal.py, merge.py)."""
    clocks = [(o.clock, o.error is None) for o in outcomes if o.clock is not None]
    if not clocks:
        return None
    if tolerance_ms is FOUND:
        found = [c["tolerance_ms"] for c, _ in clocks if c.get("tolerance_ms") is not None]
        tolerance_ms = max(found) if found else None
    return {
        "trials": len(clocks),
        "rerun": sum(bool(c.get("reruns")) for c, _ in clocks),
        "unreliable": sum(bool(c.get("unreliable")) for c, _ in clocks),
        "worst_lag_ms": max(worst_ms(c) for c, _ in clocks),
        "worst_scored_lag_ms": max([worst_ms(c) for c, scored in clocks if scored],
                                   default=None),
        "tolerance_ms": tolerance_ms,
    }


def line(clock: Mapping | None) -> str | None:
    """One sentence for the terminal, Markdown and HTML views; None without the section."""
    if not clock:
        return None
    tol = clock.get("tolerance_ms")
    scored = clock.get("worst_scored_lag_ms")
    return (f"Timing (the harness's own lateness, docs/realtime.md): {clock['trials']} "
            f"wall-clock trial(s), {clock['rerun']} re-run, {clock['unreliable']} timing "
            f"unreliable (errors, in no rate); worst lag {clock['worst_lag_ms']:.0f} ms"
            + (f", {scored:.0f} ms among scored trials" if scored is not None else "")
            + (f" (tolerance {tol:.0f} ms)" if tol is not None else
               " (no tolerance: --duplexact-timing-tolerance=off)"))


def properties(clock: Mapping | None) -> list[tuple[str, str]]:
    """The JUnit testsuite properties (``duplexact.timing.*``)."""
    if not clock:
        return []
    keys = ("trials", "rerun", "unreliable", "worst_lag_ms", "worst_scored_lag_ms",
            "tolerance_ms")
    return [(f"duplexact.timing.{k}", str(clock[k])) for k in keys
            if clock.get(k) is not None]
