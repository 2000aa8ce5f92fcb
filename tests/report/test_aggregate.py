"""aggregate: counting rules, micro-averaging, timings, JSON round trip and the paper's cells."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import (
    ImmediateResult,
    InstanceOutcome,
    SubsequentResult,
    Verdict,
)
from pytest_duplexact.report.aggregate import (
    Aggregate,
    Counts,
    Timing,
    aggregate,
    format_action_cell,
    format_cell,
    format_rate,
    format_timing,
)

V = Verdict
_ids = itertools.count()


def out(action="wait", condition="continuous_speech", imm=V.SUCCESS, sub=None, *,
        scenario="casual", source="real", timing=None, error=None, id=None) -> InstanceOutcome:
    return InstanceOutcome(
        id=id or f"i{next(_ids)}", action=action, condition=condition, scenario=scenario,
        source=source,
        immediate=ImmediateResult(imm, "r") if imm is not None else None,
        subsequent=SubsequentResult(sub, "r") if sub is not None else None,
        timing=timing, error=error)


def many(n: int, **kw) -> list[InstanceOutcome]:
    return [out(**kw) for _ in range(n)]


# --- one instance's contribution --------------------------------------------------------------

@pytest.mark.parametrize("imm, sub, expected", [
    (V.SUCCESS, V.SUCCESS, dict(n_I=1, I_success=1, n_S=1, S_success=1)),
    (V.SUCCESS, V.FAILURE, dict(n_I=1, I_success=1, n_S=1)),
    (V.SUCCESS, V.NOT_JUDGED, dict(n_I=1, I_success=1, not_judged=1, not_judged_S=1)),
    (V.SUCCESS, None, dict(n_I=1, I_success=1, not_judged=1, not_judged_S=1)),  # subsequent never evaluated
    (V.SUCCESS, V.JUDGE_ERROR, dict(n_I=1, I_success=1, judge_errors=1, judge_errors_S=1)),
    (V.SUCCESS, V.NOT_APPLICABLE, dict(n_I=1, I_success=1, not_applicable=1,
                                         not_applicable_S=1)),
    (V.FAILURE, None, dict(n_I=1)),
    # a failed immediate never enters S, whatever its subsequent says
    (V.FAILURE, V.SUCCESS, dict(n_I=1)),
    (V.FAILURE, V.NOT_APPLICABLE, dict(n_I=1)),
    (V.EXCLUDED, None, dict(excluded=1)),
    (V.NOT_JUDGED, None, dict(not_judged=1)),  # backchannel without judges
    (V.JUDGE_ERROR, None, dict(judge_errors=1)),
    (V.NOT_APPLICABLE, None, dict(not_applicable=1)),
])
def test_counts_of_one_instance(imm, sub, expected):
    assert Counts.of(out(imm=imm, sub=sub)) == Counts(n=1, **expected)


def test_an_error_counts_only_as_an_error():
    c = Counts.of(out(imm=V.SUCCESS, sub=V.SUCCESS, error="model crashed: EOF", timing=1.0))
    assert c == Counts(n=1, errors=1)
    assert c.I is None and c.S is None


def test_an_outcome_with_neither_result_nor_error_is_refused():
    with pytest.raises(ValueError, match="instance x7: .*neither an immediate result nor an "
                                         "error"):
        aggregate([out(imm=None, id="x7")])


@pytest.mark.parametrize("field, value, message", [
    ("action", "dance", "unknown action 'dance'"),
    ("condition", "yelling", "unknown condition 'yelling' for action 'wait'"),
    ("scenario", "podcast", "unknown scenario 'podcast'"),
    ("source", "tts", "unknown source 'tts'"),
    ("timing", float("nan"), "timing must be a finite number"),
])
def test_bad_outcomes_name_the_instance(field, value, message):
    kw = {"id": "inst-42", field: value}
    with pytest.raises(ValueError, match=f"instance inst-42: {message}"):
        aggregate([out(**kw)])


def test_duplicate_instances_are_refused():
    with pytest.raises(ValueError, match="instance a: appears more than once"):
        aggregate([out(id="a"), out(id="a")])


# --- rates --------------------------------------------------------------------------------------

def test_rates_are_micro_averaged_over_conditions():
    outs = (many(1, condition="inter_sentential_pause", imm=V.SUCCESS, sub=V.SUCCESS)
            + many(1, condition="intra_sentential_pause", imm=V.SUCCESS, sub=V.FAILURE)
            + many(8, condition="intra_sentential_pause", imm=V.FAILURE))
    a = aggregate(outs).actions["wait"]
    assert a.conditions["inter_sentential_pause"].I == 1.0
    assert a.conditions["intra_sentential_pause"].I == pytest.approx(1 / 9)
    assert a.counts.I == pytest.approx(2 / 10)  # pooled; the macro mean would be 5/9
    assert a.counts.I != pytest.approx(np.mean([c.I for c in a.conditions.values()]))
    assert a.counts.S == pytest.approx(1 / 2)
    assert a.counts == a.conditions["inter_sentential_pause"] + \
        a.conditions["intra_sentential_pause"]


def test_errors_and_uncounted_verdicts_never_enter_a_denominator():
    outs = (many(3, imm=V.SUCCESS, sub=V.SUCCESS) + many(1, imm=V.FAILURE)
            + many(5, imm=V.SUCCESS, sub=V.SUCCESS, error="adapter timeout")
            + many(2, imm=V.SUCCESS, sub=V.NOT_JUDGED) + many(2, imm=V.SUCCESS, sub=V.JUDGE_ERROR)
            + many(4, imm=V.FAILURE, error="websocket closed"))
    c = aggregate(outs).actions["wait"].counts
    assert (c.n, c.errors, c.n_I, c.I_success, c.n_S, c.S_success) == (17, 9, 8, 7, 3, 3)
    assert c.I == pytest.approx(7 / 8) and c.S == 1.0
    assert (c.not_judged, c.judge_errors) == (2, 2)


def test_rates_are_none_not_zero_when_nothing_was_measured():
    outs = many(3, action="hold_floor", condition="continue", imm=V.EXCLUDED) + \
        many(2, action="wait", condition="continuous_speech", imm=V.FAILURE)
    agg = aggregate(outs)
    hf, w = agg.actions["hold_floor"].counts, agg.actions["wait"].counts
    assert hf.I is None and hf.S is None and hf.excluded == 3
    assert w.I == 0.0 and w.S is None
    assert format_cell(hf) == "n/a / n/a" and format_cell(w) == "0.0 / n/a"
    assert agg.to_dict()["actions"]["hold_floor"]["counts"]["I"] is None


def test_breakdowns_by_scenario_and_source():
    outs = (many(2, scenario="meeting", source="synthesized", imm=V.SUCCESS, sub=V.FAILURE)
            + many(1, scenario="casual", source="real", imm=V.FAILURE)
            + many(1, action="ignore", condition="background_speech", scenario="meeting",
                   source="real", imm=V.SUCCESS, sub=V.SUCCESS))
    agg = aggregate(outs)
    w = agg.actions["wait"]
    assert list(w.scenarios) == ["casual", "meeting"]  # taxonomy order, observed only
    assert w.scenarios["meeting"].I == 1.0 and w.scenarios["casual"].I == 0.0
    assert list(w.sources) == ["real", "synthesized"]
    assert agg.sources["real"] == Counts(n=2, n_I=2, I_success=1, n_S=1, S_success=1)
    assert agg.sources["synthesized"].n == 2


def test_ordering_follows_the_taxonomy_not_the_input():
    outs = [out(action=c.action, condition=c.id, imm=V.FAILURE)
            for c in reversed(taxonomy.CONDITIONS)]
    agg = aggregate(outs)
    assert list(agg.actions) == list(taxonomy.ACTIONS)
    for action, a in agg.actions.items():
        assert list(a.conditions) == [c.id for c in taxonomy.conditions_of(action)]
    assert aggregate(outs[::-1]) == agg


def test_only_observed_groups_appear():
    agg = aggregate(many(2, action="take_turn", condition="delayed", imm=V.SUCCESS,
                         sub=V.SUCCESS))
    assert list(agg.actions) == ["take_turn"]
    assert list(agg.actions["take_turn"].conditions) == ["delayed"]
    assert aggregate([]) == Aggregate(Counts(), {}, {})


# --- timing diagnostics ------------------------------------------------------------------------

def test_timing_median_iqr_n_numpy_linear():
    vals = [0.5, 1.0, 2.0, 4.0, 8.0]
    outs = [out(action="stop", condition="direct_interruption", sub=V.SUCCESS, timing=v)
            for v in vals]
    t = aggregate(outs).actions["stop"].timing
    p25, med, p75 = np.percentile(vals, [25, 50, 75])
    assert (t.n, t.median, t.iqr) == (5, med, p75 - p25) == (5, 2.0, 3.0)
    assert format_timing(t) == "2.00 (3.00, 5)"


def test_timing_per_condition_and_pooled_per_action():
    outs = ([out(action="interrupt", condition="help", timing=v) for v in (-8.0, -6.0, -4.0)]
            + [out(action="interrupt", condition="safety", timing=v) for v in (0.5,)]
            + [out(action="interrupt", condition="safety", imm=V.FAILURE)]  # no timing
            + [out(action="interrupt", condition="safety", timing=9.0, error="crash")])
    a = aggregate(outs).actions["interrupt"]
    assert a.condition_timings["help"] == Timing.of([-8.0, -6.0, -4.0])
    assert a.condition_timings["help"].median == -6.0  # negative = early
    safety = a.condition_timings["safety"]
    assert (safety.n, safety.median, safety.iqr) == (1, 0.5, None)  # errors never timed
    assert format_timing(safety) == "0.50 (n/a, 1)"
    assert a.timing == Timing.of([-8.0, -6.0, -4.0, 0.5])  # pooled, not median of medians
    assert a.timing.median == -5.0


def test_timing_absent_or_empty():
    agg = aggregate(many(2, imm=V.SUCCESS, sub=V.SUCCESS)
                    + many(2, action="recover", condition="revise", imm=V.FAILURE))
    assert agg.actions["wait"].timing is None and agg.actions["wait"].condition_timings == {}
    rec = agg.actions["recover"]
    assert rec.timing == Timing() and rec.condition_timings == {"revise": Timing()}
    assert format_timing(rec.timing) == "n/a" and format_timing(None) == "n/a"
    assert format_action_cell(rec.counts, rec.timing) == "0.0 / n/a / n/a"


# --- JSON -------------------------------------------------------------------------------------

def mixed_run() -> list[InstanceOutcome]:
    outs = []
    for i, c in enumerate(taxonomy.CONDITIONS):
        scen = taxonomy.SCENARIOS[i % 4]
        src = taxonomy.SOURCES[i % 2]
        timed = c.action in taxonomy.TIMING_DIAGNOSTIC
        outs += [out(c.action, c.id, V.SUCCESS, V.SUCCESS, scenario=scen, source=src,
                     timing=0.1 * i if timed else None),
                 out(c.action, c.id, V.SUCCESS, V.FAILURE, scenario=scen, source=src,
                     timing=0.2 * i if timed else None),
                 out(c.action, c.id, V.FAILURE, scenario=scen, source=src),
                 out(c.action, c.id, V.EXCLUDED, source=src),
                 out(c.action, c.id, V.SUCCESS, V.NOT_JUDGED, scenario=scen),
                 out(c.action, c.id, None, error="boom", source=src)]
    return outs


def test_json_round_trip():
    agg = aggregate(mixed_run())
    text = json.dumps(agg.to_dict())
    back = Aggregate.from_dict(json.loads(text))
    assert back == agg
    assert json.dumps(back.to_dict()) == text


def test_json_shape_is_plain_and_documented():
    d = aggregate(mixed_run()).to_dict()
    assert set(d) == {"total", "actions", "sources"}
    stop = d["actions"]["stop"]
    assert set(stop) == {"action", "counts", "conditions", "scenarios", "sources", "timing",
                         "condition_timings"}
    assert set(stop["counts"]) == {"n", "n_I", "I_success", "I", "n_S", "S_success", "S",
                                   "excluded", "errors", "not_judged", "judge_errors",
                                   "not_applicable", "not_judged_S", "judge_errors_S",
                                   "not_applicable_S", "borderline_I"}
    assert set(stop["timing"]) == {"n", "median", "p25", "p75", "iqr"}
    assert d["total"]["n"] == 6 * len(taxonomy.CONDITIONS)


# --- the paper's cells ---------------------------------------------------------------------------

def test_format_rate_and_cell():
    assert format_rate(None) == "n/a"
    assert format_rate(0.0) == "0.0" and format_rate(1.0) == "100.0"
    assert format_rate(163 / 200) == "81.5" and format_rate(2 / 3, digits=2) == "66.67"
    c = Counts(n=200, n_I=200, I_success=163, n_S=163, S_success=69)
    assert format_cell(c) == "81.5 / 42.3 (163)"
    assert format_action_cell(c) == "81.5 / 42.3"
    t = Timing(96, 0.96, 0.5, 2.47)
    assert format_timing(t) == "0.96 (1.97, 96)"
    assert format_action_cell(c, t) == "81.5 / 0.96 / 42.3"


def paper_condition(action, cid, I_pct, S_pct, n_S, n=200):
    """Outcomes that reproduce one Table 16 cell (the paper runs 200 instances a condition)."""
    i_ok = round(I_pct * n / 100)
    s_ok = round(S_pct * n_S / 100)
    assert i_ok == n_S
    return (many(s_ok, action=action, condition=cid, imm=V.SUCCESS, sub=V.SUCCESS)
            + many(n_S - s_ok, action=action, condition=cid, imm=V.SUCCESS, sub=V.FAILURE)
            + many(n - i_ok, action=action, condition=cid, imm=V.FAILURE))


@pytest.mark.parametrize("action, cells, table4", [
    # Moshi, paper Table 16 (a)/(b) -> Table 4; macro means of S would give 89.0 / 23.6.
    ("ignore", {"background_speech": (43.0, 89.5, 86),
                "other_directed_speech": (22.0, 88.6, 44)}, "32.5 / 89.2"),
    ("take_turn", {"immediate": (33.5, 19.4, 67), "delayed": (53.0, 10.4, 106),
                   "slight_overlap": (22.0, 40.9, 44)}, "36.2 / 19.4"),
    ("wait", {"inter_sentential_pause": (81.5, 42.3, 163),
              "intra_sentential_pause": (90.0, 47.8, 180),
              "continuous_speech": (75.0, 46.7, 150)}, "82.2 / 45.6"),
])
def test_micro_averaging_reproduces_the_papers_table_4(action, cells, table4):
    outs = [o for cid, (i, s, n_s) in cells.items()
            for o in paper_condition(action, cid, i, s, n_s)]
    a = aggregate(outs).actions[action]
    for cid, (i, s, n_s) in cells.items():
        assert format_cell(a.conditions[cid]) == f"{i:.1f} / {s:.1f} ({n_s})"
    assert format_action_cell(a.counts) == table4
    macro_S = np.mean([c.S for c in a.conditions.values()])
    if action != "wait":  # the wait cells happen to round alike either way
        assert format_rate(macro_S) != table4.split(" / ")[1]


# --- invariants --------------------------------------------------------------------------------

VERDICTS = list(Verdict)


@st.composite
def outcome_lists(draw):
    n = draw(st.integers(0, 40))
    outs = []
    for i in range(n):
        c = draw(st.sampled_from(taxonomy.CONDITIONS))
        err = draw(st.sampled_from([None, None, None, "boom"]))
        imm = draw(st.sampled_from(VERDICTS + [None])) if err else draw(st.sampled_from(VERDICTS))
        sub = draw(st.sampled_from(VERDICTS + [None]))
        timing = draw(st.none() | st.floats(-20, 20)) if c.action in \
            taxonomy.TIMING_DIAGNOSTIC else None
        outs.append(out(c.action, c.id, imm, sub, scenario=draw(st.sampled_from(
            taxonomy.SCENARIOS)), source=draw(st.sampled_from(taxonomy.SOURCES)),
            timing=timing, error=err, id=f"h{i}"))
    return outs


@settings(max_examples=100, deadline=None)
@given(outcome_lists())
def test_every_breakdown_pools_to_the_action(outs):
    agg = aggregate(outs)
    assert agg.total.n == len(outs)
    assert sum((c for c in agg.sources.values()), Counts()) == agg.total
    for a in agg.actions.values():
        for part in (a.conditions, a.scenarios, a.sources):
            assert sum(part.values(), Counts()) == a.counts
        c = a.counts
        assert c.n_S <= c.I_success <= c.n_I and c.S_success <= c.n_S
        assert c.n_I + c.errors + c.excluded <= c.n
        if a.timing is not None:
            assert a.timing.n == sum(t.n for t in a.condition_timings.values())
    assert Aggregate.from_dict(json.loads(json.dumps(agg.to_dict()))) == agg


def test_the_not_in_a_rate_note_labels_each_stage():
    """backchannel's unjudged immediate stage and take_turn's unjudged follow-through both
    read "not judged": the note says which stage each is."""
    from pytest_duplexact.report import why_no_rate

    c = (Counts.of(out(imm=V.NOT_JUDGED)) + Counts.of(out(imm=V.NOT_JUDGED))
         + sum((Counts.of(out(imm=V.SUCCESS, sub=None)) for _ in range(7)), Counts())
         + Counts.of(out(imm=V.EXCLUDED)))
    assert why_no_rate(c.to_dict()) == "1 excluded, 2 not judged (I), 7 not judged (S)"
    old = {k: v for k, v in c.to_dict().items() if not k.endswith("_S")}  # an older report
    assert why_no_rate(old) == "1 excluded, 9 not judged"
    assert Counts.from_dict(old).not_judged_S == 0
