"""The budget's decision (pytest_duplexact/spend/budget.py), below the wall clock: a run that
admits trials by it passes its budget by at most one trial's cost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.spend.budget import Budget, BudgetError, parse_duration
from pytest_duplexact.spend.cost import load_prices

PRICES = {"currency": "USD", "models": {"m": {"audio_in_s": 1.0}}}


def _spent(cost: float) -> dict:
    return {"model": {"model": "m", "audio_in_s": cost}}


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("45m", 2700),
                                          ("45min", 2700), ("2h", 7200), ("1h30m", 5400),
                                          ("0.5h", 1800), ("1h30m15s", 5415), ("1h 30m", 5400),
                                          ("2M5S", 125)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1x", "-5", "0", "5m garbage", "h"])
def test_bad_durations_are_refused(text):
    with pytest.raises(BudgetError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["1m30m", "30m1h", "1h1h", "1s2m", "30s1m"])
def test_a_unit_twice_or_out_of_order_is_refused(text):
    """``1m30m`` was 31 minutes: a unit given twice, or after a smaller one, is a typo."""
    with pytest.raises(BudgetError) as e:
        parse_duration(text)
    assert str(e.value) == (f"expected a duration such as 90s, 45m, 2h or 1h30m, got {text!r} "
                            "(each unit once, hours then minutes then seconds)")


def test_a_budget_must_be_positive():
    with pytest.raises(BudgetError, match="> 0"):
        Budget(0.0, None, PRICES)


def test_in_flight_trials_count_against_the_budget():
    b = Budget(1.0, None, PRICES, trial_estimate=0.3)
    assert b.admits(in_flight=0)
    assert b.admits(in_flight=3)  # 0.9 committed
    assert not b.admits(in_flight=4)  # 1.2 would be committed
    assert "budget of 1.00 USD reached" in b.stopped and "4 trial(s) in flight" in b.stopped
    assert not b.admits(in_flight=0)  # once stopped, no new trial starts again


def test_measured_cost_replaces_the_estimate_once_a_trial_finished():
    b = Budget(1.0, None, PRICES, trial_estimate=10.0)
    b.record(_spent(0.2), finished=1)
    assert b.per_trial == pytest.approx(0.2)
    assert b.admits(in_flight=3)  # 0.2 + 3 x 0.2
    b.record(_spent(1.0), finished=2)
    assert not b.admits(in_flight=0)
    assert b.to_dict()["spent"] == 1.0


def test_wall_limit():
    b = Budget(None, 60.0, PRICES, started=100.0)
    assert b.admits(0, now=159.0)
    assert not b.admits(0, now=160.0)
    assert b.stopped == "wall-time limit of 1 min reached"


def test_unpriced_spend_does_not_count_as_free_with_the_bundled_table():
    b = Budget(1.0, None, load_prices())
    b.record({"text_judge": {"model": "gpt-4o", "input_tokens": 100_000,
                             "output_tokens": 10_000}}, finished=1)
    assert b.spent == pytest.approx(100_000 * 2.5e-6 + 10_000 * 10e-6)


@settings(max_examples=200, deadline=None)
@given(budget=st.floats(0.01, 50), costs=st.lists(st.floats(0, 5), min_size=1, max_size=60),
       lanes=st.integers(1, 6), estimate=st.floats(0, 5))
def test_a_run_admitted_by_the_budget_passes_it_by_at_most_one_trial(budget, costs, lanes,
                                                                     estimate):
    """Simulate ``lanes`` trials in flight at once (xdist workers x concurrency): a trial
    starts only when the budget admits it; each finished trial's cost is then measured."""
    b = Budget(budget, None, PRICES, trial_estimate=estimate)
    pending = list(costs)
    running: list[float] = []
    spent, done = 0.0, 0
    while pending or running:
        while pending and len(running) < lanes and b.admits(len(running)):
            running.append(pending.pop(0))
        if not running:
            break
        spent += running.pop(0)
        done += 1
        b.record(_spent(spent), finished=done)
    biggest = max(costs)
    if b.stopped is None:  # everything ran: the budget never bit
        assert done == len(costs)
    else:
        # the committed amount was below the budget when the last trial started; what was
        # in flight then could each cost more than the mean, hence at most `lanes` trials
        assert spent <= budget + lanes * biggest + 1e-9
        if lanes == 1:
            assert spent <= budget + biggest + 1e-9
