"""The run's timing integrity in the report (issue 33): the ``clock`` section from the
outcomes' clocks, its one sentence in every view, its JUnit properties; stepped runs have
none, so their reports keep their bytes."""

from __future__ import annotations

import pytest

from pytest_duplexact.data.results import InstanceOutcome, outcome_problem, success
from pytest_duplexact.pytest_plugin.config import _timing_tolerance
from pytest_duplexact.report.sections.timing import line, properties, section
from tests.report.helpers import parsed


def _outcome(i, clock=None, error=None):
    return InstanceOutcome(f"take_turn-immediate-{i}", "take_turn", "immediate", "casual",
                           "real", None if error else success("ok"), error=error, clock=clock)


def _clock(lag, reruns=0, unreliable=False):
    return {"input_lag_max_ms": lag, "output_lag_max_ms": 1.0, "loop_stall_max_ms": 2.0,
            "tolerance_ms": 100.0, "reruns": reruns, "unreliable": unreliable}


def test_the_section_counts_reruns_and_unreliable_trials_and_the_worst_lag():
    outs = [_outcome(0, _clock(3.0)), _outcome(1, _clock(40.0, reruns=1)),
            _outcome(2, _clock(240.0, reruns=2, unreliable=True), error="TimingUnreliable: x")]
    s = section(outs)
    assert s == {"trials": 3, "rerun": 2, "unreliable": 1, "worst_lag_ms": 240.0,
                 "worst_scored_lag_ms": 40.0, "tolerance_ms": 100.0}
    assert line(s) == ("Timing (the harness's own lateness, docs/realtime.md): 3 wall-clock "
                       "trial(s), 2 re-run, 1 timing unreliable (errors, in no rate); worst lag "
                       "240 ms, 40 ms among scored trials (tolerance 100 ms)")
    assert ("duplexact.timing.unreliable", "1") in properties(s)
    assert outs[2].unreliable and not outs[1].unreliable


def test_the_section_states_the_reporting_runs_tolerance_not_the_largest_found():
    """A resume at 100 ms reusing trials recorded with the tolerance off (and on time): the
    report says 100 ms, the tolerance every scored trial was judged against; off is off."""
    outs = [_outcome(0, dict(_clock(3.0), tolerance_ms=None)), _outcome(1, _clock(40.0))]
    assert section(outs, 100.0)["tolerance_ms"] == 100.0
    assert section(outs, None)["tolerance_ms"] is None
    assert section([_outcome(0, _clock(3.0)), _outcome(1, dict(_clock(3.0), tolerance_ms=250.0))],
                   100.0)["tolerance_ms"] == 100.0


def test_a_stepped_run_has_no_clock_anywhere():
    outs = [_outcome(0)]
    assert section(outs) is None and line(None) is None and properties(None) == []
    assert "clock" not in outs[0].to_dict()


def test_a_stored_clock_is_checked_and_read_back():
    d = _outcome(0, _clock(3.0)).to_dict()
    assert outcome_problem(d) is None
    assert InstanceOutcome.from_dict(d).clock == d["clock"]
    assert "clock.input_lag_max_ms" in outcome_problem(dict(d, clock=dict(
        d["clock"], input_lag_max_ms=float("nan"))))
    assert outcome_problem(dict(d, clock=[1])) == "'clock' is not an object"


@pytest.mark.parametrize("given, seconds", [(None, 0.1), ("off", None), ("OFF", None),
                                            ("250", 0.25), ("40ms", 0.04)])
def test_the_tolerance_option(given, seconds):
    assert _timing_tolerance(given) == seconds


@pytest.mark.parametrize("bad", ["0", "-5", "soon", "inf", "nan"])
def test_a_bad_tolerance_is_one_line(bad):
    with pytest.raises(pytest.UsageError, match="milliseconds"):
        _timing_tolerance(bad)


def test_every_view_says_it_and_a_stepped_report_has_no_section():
    from pytest_duplexact.report import builder
    from pytest_duplexact.report.views import html, markdown, terminal
    from pytest_duplexact.run.settings import RunSettings

    outs = [_outcome(0, _clock(3.0)), _outcome(1, _clock(240.0, reruns=2, unreliable=True),
                                               error="TimingUnreliable: timing unreliable")]
    report = builder.build(builder.Ran(outs, RunSettings(model="m"), "m"))
    sentence = line(report.clock)
    assert report.to_json()["clock"]["unreliable"] == 1
    assert sentence in terminal.render(parsed(report))
    assert sentence in markdown.render(parsed(report))
    assert sentence.replace("'", "&#x27;") in html.render(parsed(report))
    stepped = builder.build(builder.Ran([_outcome(0)], RunSettings(model="m"), "m"))
    assert "clock" not in stepped.to_json()
    assert not any(x.startswith("Timing (") for x in terminal.render(parsed(stepped)))
