"""Borderline verdicts in the report: counted per action, kept by outcome.json's round trip
and its checks, shown by every view, marked on the flips, and set aside by the baseline gate
when asked (--duplexact-baseline-ignore-borderline)."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from pytest_duplexact.data.results import InstanceOutcome, outcome_problem
from pytest_duplexact.report.aggregate import Counts, aggregate
from pytest_duplexact.report.sections import baseline
from pytest_duplexact.report.views.compare import main as compare_main
from pytest_duplexact.report.views.html import render as render_html
from pytest_duplexact.report.views.markdown import render as render_markdown
from pytest_duplexact.report.views.terminal import render as render_terminal
from tests.report.helpers import outcomes_for, parsed, report

FLIP = {"edge": "onset", "at": 5.45, "shift": 0.1, "segment": 0, "verdict": "failure"}


def borderline(o: InstanceOutcome, flips=(FLIP,)) -> InstanceOutcome:
    return dataclasses.replace(o, immediate=dataclasses.replace(o.immediate,
                                                                borderline=tuple(flips)))


def take_turn(n: int, successes: int, marked: int) -> list[InstanceOutcome]:
    """``n`` take_turn.delayed outcomes, the first ``marked`` borderline, the rest not."""
    outs = outcomes_for("take_turn.delayed", n, successes)
    return [borderline(o) if k < marked else borderline(o, ()) for k, o in enumerate(outs)]


def test_counts_count_borderline_verdicts_and_an_older_report_reads_0():
    agg = aggregate(take_turn(24, 20, 7) + outcomes_for("wait.inter_sentential_pause", 3, 3))
    assert agg.actions["take_turn"].counts.borderline_I == 7
    assert agg.actions["wait"].counts.borderline_I == 0
    old = {k: v for k, v in agg.total.to_dict().items() if k != "borderline_I"}
    assert Counts.from_dict(old).borderline_I == 0


def test_outcome_round_trip_keeps_borderline_and_older_outcomes_load():
    o = take_turn(1, 1, 1)[0]
    d = json.loads(json.dumps(o.to_dict()))
    assert d["borderline"] == [FLIP] and outcome_problem(d) is None
    assert "borderline" not in d["immediate"]  # beside the stages: older readers read it
    assert InstanceOutcome.from_dict(d) == o
    old = outcomes_for("take_turn.delayed", 1, 1)[0].to_dict()
    assert "borderline" not in old  # never computed: keeps the old bytes
    assert InstanceOutcome.from_dict(old).immediate.borderline is None


def test_a_malformed_borderline_entry_is_refused_by_field():
    d = take_turn(1, 1, 1)[0].to_dict()
    for bad in ("yes", [{"edge": "onset"}], [{**FLIP, "at": float("nan")}],
                [{**FLIP, "verdict": "maybe"}], [{**FLIP, "segment": True}]):
        d["borderline"] = bad
        assert outcome_problem(d).startswith("'borderline' is")


def test_every_view_gives_the_count_per_action_and_marks_failed_borderline_instances():
    rep = report(take_turn(24, 20, 7) + outcomes_for("wait.inter_sentential_pause", 3, 3))
    line = next(x for x in render_terminal(parsed(rep)) if x.startswith("Borderline I verdicts"))
    assert line.endswith("wait 0 of 3, take_turn 7 of 24")
    md = render_markdown(parsed(rep))
    assert "take_turn 7 of 24" in md
    assert "onset at 5.45 s moved" not in md  # no borderline failure
    page = render_html(parsed(rep), audio="none")
    assert 'id="borderline"' in page and "take_turn 7 of 24" in page
    assert page.count("onset at 5.45 s moved +0.10 s") == 7


def test_a_failed_borderline_instance_shows_what_would_flip_it(tmp_path):
    from pytest_duplexact.report.views.html import _failures_section

    rep = report(take_turn(3, 0, 1))
    assert "onset at 5.45 s moved +0.10 s -&gt; failure" in render_markdown(parsed(rep))
    section = _failures_section(parsed(rep), [], "none", tmp_path, 0)
    assert section.count('class="warn borderline"') == 1


def test_a_report_from_before_borderline_verdicts_shows_no_count():
    rep = report(outcomes_for("take_turn.delayed", 3, 3))
    for counts in [rep["summary"]["total"]] + [a["counts"]
                                               for a in rep["summary"]["actions"].values()]:
        counts.pop("borderline_I")
    assert not any(x.startswith("Borderline") for x in render_terminal(parsed(rep)))
    from pytest_duplexact.report.views.html import _borderline_section

    assert "before borderline verdicts" in _borderline_section(parsed(rep))


def runs(marked: int):
    """12 take_turn.delayed instances: all succeed in the baseline, all fail now; the first
    ``marked`` of them borderline in this run."""
    base = report(take_turn(12, 12, 0))
    now = report(take_turn(12, 0, marked))
    return base, now


def test_the_gate_fails_on_borderline_flips_unless_told_to_ignore_them():
    base, now = runs(12)
    section = baseline.compare(parsed(now), parsed(base))
    assert not section["passed"] and "take_turn.I" in section["drops"]
    assert all(f["borderline"] == ["current"] and "ignored" not in f
               for f in section["flips"])
    assert "[borderline in this run]" in baseline.flip_line(section["flips"][0])
    assert "12 borderline" in "\n".join(baseline.render_lines(section))

    ignoring = baseline.compare(parsed(now), parsed(base), ignore_borderline=True)
    assert ignoring["passed"] and ignoring["ignore_borderline"] is True
    assert all(f["ignored"] for f in ignoring["flips"])
    assert {s["target"] for s in ignoring["not_compared"]} >= {"take_turn.I",
                                                              "take_turn.delayed.I"}
    assert "set aside by the gate" in "\n".join(baseline.render_lines(ignoring))


def test_ignoring_borderline_flips_still_fails_on_the_others():
    base, now = runs(0)
    section = baseline.compare(parsed(now), parsed(base), ignore_borderline=True)
    assert not section["passed"]
    row = next(r for r in section["comparisons"] if r["target"] == "take_turn.I")
    assert row["borderline_ignored"] == 0 and row["pairs"] == 12


def test_duplexact_compare_ignores_borderline_flips_when_told(tmp_path, capsys):
    base, now = runs(12)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(base))
    b.write_text(json.dumps(now))
    assert compare_main(SimpleNamespace(a=str(a), b=str(b))) == 1
    assert "Flips (12; 12 borderline)" in capsys.readouterr().out
    assert compare_main(SimpleNamespace(a=str(a), b=str(b), ignore_borderline=True)) == 0
    assert "set aside by the gate" in capsys.readouterr().out


def test_merge_carries_borderline_flips_and_counts(tmp_path):
    from pytest_duplexact.report.store.merge import merge
    from pytest_duplexact.run.selection import shard_of
    from tests.report.helpers import settings

    outs = take_turn(12, 6, 5)
    full = report(outs)
    paths = []
    for k in (1, 2):
        part = [o for o in outs if shard_of(o.id, 2) == k]
        rep = report(part, selection=dict(settings()["selection"], shard=f"{k}/2"))
        p = tmp_path / f"shard{k}" / "report.json"
        p.parent.mkdir()
        p.write_text(json.dumps(rep))
        paths.append(p)
    merged = merge(paths)
    assert merged["summary"]["actions"]["take_turn"]["counts"]["borderline_I"] == 5
    by_id = {i["id"]: i.get("borderline") for i in merged["instances"]}
    assert by_id == {i["id"]: i["borderline"] for i in full["instances"]}


def test_the_plugin_option_reaches_the_gate(tmp_path):
    """--duplexact-baseline-ignore-borderline is read into the RunConfig, and the report's
    builder (the plugin's and merge's) hands it to the gate."""
    from pytest_duplexact.pytest_plugin.config import RunConfig
    from pytest_duplexact.report.builder import BaselineGate, Ran, build
    from pytest_duplexact.run.settings import RunSettings
    from tests.plugin.test_run_config import _Config
    from tests.report.helpers import settings

    assert RunConfig.from_pytest(_Config(
        tmp_path, baseline_ignore_borderline=True)).baseline_ignore_borderline is True
    assert RunConfig().baseline_ignore_borderline is False
    base, _ = runs(12)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(base))
    stored = RunSettings.from_dict(settings())
    for ignore, passed in ((False, False), (True, True)):
        rep = build(Ran(take_turn(12, 0, 12), stored, "toy"),
                    baseline=BaselineGate(str(path), ignore_borderline=ignore))
        assert rep.baseline["passed"] is passed


def test_a_failed_instances_message_says_what_would_flip_it(tmp_path):
    from pytest_duplexact.report.explain import explain

    o = borderline(take_turn(1, 0, 0)[0], ({**FLIP, "at": 5.55, "shift": -0.1,
                                            "verdict": "success"},))
    folder = tmp_path / o.recording
    folder.mkdir(parents=True)
    (folder / "timeline.json").write_text(json.dumps(
        {"duration": 10.0, "segments": [{"start": 5.55, "end": 7.0, "text": "a b c d e"}],
         "speech": [[5.55, 7.0]], "cue": None, "user": [[0.0, 5.0]]}))
    text = explain(o, tmp_path)
    assert "borderline I: onset at 5.55 s moved -0.10 s -> success" in text
    assert "borderline" not in explain(borderline(o, ()), tmp_path)
