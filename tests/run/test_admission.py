"""The AIMD controller of the in-flight cap (run/admission.py), on numbers: no loop, no
clock, so nothing here depends on the machine."""

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.run.admission import (
    BACK_OFF_AT,
    CONTROL_S,
    DECREASE,
    HEADROOM_AT,
    HOLD_S,
    INITIAL_WINDOW,
    Aimd,
    sustained,
)

TOL = 0.1
requested = st.integers(1, 512)
# one observation: seconds since the last one, lateness (s), in flight as a share of the cap
steps = st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.0, 1.0), st.floats(0.0, 2.0)),
                 max_size=60)


def drive(aimd: Aimd, seq):
    """(now, lateness, in_flight, cap before, cap after) per observation."""
    now, out = 0.0, []
    for dt, late, share in seq:
        now += dt
        before = aimd.cap
        flight = int(share * before)
        out.append((now, late, flight, before, aimd.observe(now, late, flight)))
    return out


@given(requested, steps)
def test_the_cap_stays_between_one_and_what_was_asked(n, seq):
    for *_, after in drive(Aimd(n, TOL), seq):
        assert 1 <= after <= n


@given(requested, steps)
def test_lateness_over_the_back_off_line_never_raises_the_cap(n, seq):
    for _, late, _, before, after in drive(Aimd(n, TOL), seq):
        if late > BACK_OFF_AT * TOL:
            assert after <= before
            assert after in (before, max(1, math.floor(before * DECREASE)))


@given(requested, steps)
def test_cuts_are_at_least_a_hold_apart(n, seq):
    cuts = [now for now, _, _, before, after in drive(Aimd(n, TOL), seq) if after < before]
    assert all(b - a >= HOLD_S for a, b in zip(cuts, cuts[1:]))


@given(requested, steps)
def test_the_cap_grows_only_with_headroom_used_and_at_most_doubles(n, seq):
    for _, late, flight, before, after in drive(Aimd(n, TOL), seq):
        if after > before:
            assert late <= HEADROOM_AT * TOL and flight >= before
            assert after <= 2 * before


@given(requested, st.floats(0.0, HEADROOM_AT * TOL))
def test_headroom_used_brings_the_cap_back_to_what_was_asked(n, late):
    aimd = Aimd(n, TOL)
    aimd.rerun(0.0, 3)
    now = 0.0
    for _ in range(n + 10):  # additive: at most one step per trial asked for
        now += max(CONTROL_S, HOLD_S)
        aimd.observe(now, late, aimd.cap)
    assert aimd.cap == n


@given(requested, st.floats(BACK_OFF_AT * TOL + 1e-6, 10.0))
def test_a_loop_late_for_long_enough_comes_down_to_one(n, late):
    aimd = Aimd(n, TOL)
    now = 0.0
    for _ in range(200):  # 0.75 ** 200 of anything up to 512 is below one
        now += HOLD_S
        aimd.observe(now, late, aimd.cap)
    assert aimd.cap == 1


@given(requested, st.floats(HEADROOM_AT * TOL + 1e-6, BACK_OFF_AT * TOL), steps)
def test_between_the_lines_the_cap_holds(n, late, seq):
    aimd = Aimd(n, TOL)
    start = aimd.cap
    assert all(after == start for *_, after in drive(aimd, [(d, late, s) for d, _, s in seq]))


def test_it_starts_at_the_initial_window_and_slow_starts_up_to_the_request():
    aimd = Aimd(256, TOL)
    assert aimd.cap == INITIAL_WINDOW
    caps = [aimd.observe(k * CONTROL_S, 0.0, aimd.cap) for k in range(1, 5)]
    assert caps == [64, 128, 256, 256]
    assert Aimd(8, TOL).cap == 8  # small runs: all of it at once, as before


def test_after_a_cut_growth_is_one_at_a_time():
    aimd = Aimd(100, TOL, cap=80)
    assert aimd.observe(0.0, 0.2, 80) == 60  # 80 x 0.75
    assert aimd.observe(0.5, 0.2, 60) == 60  # within the hold: one stall, one cut
    assert aimd.observe(0.9, 0.0, 60) == 60  # within the hold: no growth either
    assert aimd.observe(1.0, 0.0, 60) == 61
    assert aimd.observe(1.1, 0.0, 61) == 61  # one step per CONTROL_S
    assert aimd.observe(1.25, 0.0, 61) == 62
    assert aimd.observe(1.5, 0.0, 30) == 62  # headroom not used: no growth


@given(requested, st.integers(1, 12))
def test_a_rerun_lowers_the_cap_to_the_request_halved_per_attempt(n, attempt):
    aimd = Aimd(n, TOL)
    assert aimd.rerun(0.0, attempt) == max(1, min(aimd.cap, n >> attempt))


@given(st.lists(st.integers(1, 512), min_size=1))
def test_sustained_is_the_median_and_minimum_of_the_caps(caps):
    got = sustained(caps)
    assert got["sustained_min"] == min(caps)
    below = sum(c <= got["sustained_p50"] for c in caps)
    assert below >= len(caps) / 2 and sum(c < got["sustained_p50"] for c in caps) < len(caps) / 2
    assert sustained([7] * len(caps)) == {"sustained_p50": 7, "sustained_min": 7}


def test_sustained_of_nothing_is_none():
    assert sustained([]) is None
