"""``duplexact merge`` on synthetic shard reports: equality with the unsharded report, and
every refusal with its reason. (The end-to-end merge of real shard runs: test_runs.py.)"""

from __future__ import annotations

import argparse
import json
import re

import pytest

from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.report.store.merge import PROVENANCE_KEYS, MergeError, main, merge
from pytest_duplexact.run.selection import shard_of
from tests.report.helpers import mixed_report, parsed, report, settings


def _sel(shard):
    return dict(settings()["selection"], shard=shard)


def _shards(tmp_path, n=3, full=None):
    full = full or mixed_report()
    paths = []
    for k in range(1, n + 1):
        part = [i for i in full["instances"] if shard_of(i["id"], n) == k]
        from pytest_duplexact.data.results import InstanceOutcome

        rep = report([InstanceOutcome.from_dict(d) for d in part], selection=_sel(f"{k}/{n}"))
        rep["notes"] = [f"note of shard {k}", "shared note"]
        rep["gates"] = [{"gate": "wait.I>=0.9", "passed": False, "message": "shard-level"}]
        rep["usage"] = {"text_judge": {"model": "judge-x", "calls": k, "cache_hits": 1}}
        p = tmp_path / f"shard{k}" / "report.json"
        p.parent.mkdir()
        p.write_text(json.dumps(rep))
        paths.append(p)
    return full, paths


def _comparable(rep):
    return {k: v for k, v in rep.items()
            if k not in VOLATILE_KEYS + PROVENANCE_KEYS + ("notes", "usage", "cost")}


def test_merge_equals_the_unsharded_report(tmp_path):
    full, paths = _shards(tmp_path)
    merged = merge(paths)
    assert _comparable(merged) == _comparable(full)
    assert merged["notes"] == ["note of shard 1", "shared note", "note of shard 2",
                               "note of shard 3"]
    assert [s["shard"] for s in merged["shards"]] == ["1/3", "2/3", "3/3"]
    assert sum(s["instances"] for s in merged["shards"]) == full["totals"]["instances"]
    assert merged["gates"] == []  # shard gates judged one shard only
    assert merged["usage"] == {"text_judge": {"model": "judge-x", "calls": 6, "cache_hits": 3}}
    # the cost is priced again from the summed usage (calls alone bill nothing)
    assert merged["cost"]["services"]["text_judge"] == {"model": "judge-x", "cost": 0.0,
                                                        "note": "nothing billed"}


def test_what_a_hook_added_to_every_shard_alike_is_merged_the_rest_named(tmp_path):
    """extra (pytest_duplexact_report): the hook cannot run over the merged run, so a key is
    kept only where every shard agrees; a key they disagree on is named in a note."""
    _, paths = _shards(tmp_path)
    assert "extra" not in merge(paths)  # no hook, no key: the default bytes
    for k, p in enumerate(paths, 1):
        _edit(p, lambda d, k=k: d.update(extra={"ckpt": "step-9000", "shard_seen": k}))
    merged = merge(paths)
    assert merged["extra"] == {"ckpt": "step-9000"}
    assert merged["notes"][-1] == ("extra (a pytest_duplexact_report hook's) key(s) "
                                   "shard_seen differ between the shards: not merged")


def test_main_writes_the_merged_report(tmp_path, capsys):
    full, paths = _shards(tmp_path)
    out = tmp_path / "merged.json"
    assert main(argparse.Namespace(reports=[str(p) for p in paths], output=str(out))) == 0
    assert _comparable(json.loads(out.read_text())) == _comparable(full)
    assert "23 instance(s)" in capsys.readouterr().out
    from pytest_duplexact.data.atomic import FILE_MODE

    assert out.stat().st_mode & 0o777 == FILE_MODE  # the user's file, not a private run file


def _edit(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(model="other"), "model 'other' differs"),
    (lambda d: d["settings"].update(dataset_fingerprint="0" * 64),
     "settings.dataset_fingerprint"),
    (lambda d: d["settings"].update(judge="gpt-5.4"), "settings.judge: None vs 'gpt-5.4'"),
    (lambda d: d["settings"].update(channel="phone"), "settings.channel: 'clean' vs 'phone'"),
    (lambda d: d["settings"]["selection"].update(limit=2), "settings.selection.limit"),
    (lambda d: d["settings"]["selection"].update(shard="1/3"), "shard 1/3 is also"),
    (lambda d: d["settings"]["selection"].update(shard="2/4"), "different shard counts"),
    (lambda d: d["settings"]["selection"].update(shard=None), "not a shard"),
    (lambda d: d.update(version=99), "field 'version' is 99"),
    (lambda d: d.update(schema="x"), "field 'schema'"),
])
def test_refusals_name_file_and_field(tmp_path, edit, message):
    _, paths = _shards(tmp_path)
    _edit(paths[1], edit)
    with pytest.raises(MergeError, match=re.escape(message)) as e:
        merge(paths)
    assert "shard" in str(e.value) or str(paths[1]) in str(e.value)


def test_shards_of_one_dataset_at_two_paths_merge(tmp_path):
    """Two machines, two checkouts: the path differs, the content (fingerprint) does not."""
    full, paths = _shards(tmp_path)
    _edit(paths[1], lambda d: d["settings"].update(dataset="/other/machine/checkout/data"))
    merged = merge(paths)
    assert _comparable(merged) == _comparable(full)
    assert merged["settings"]["dataset"] == full["settings"]["dataset"]  # the first shard's


def test_shards_served_by_two_bridges_merge_when_they_serve_one_model(tmp_path):
    """Each shard's run names what its server said (settings.served); two bridges of one
    model may run differently (max_sessions), two checkpoints may not be merged."""
    _, paths = _shards(tmp_path, n=2)
    for k, path in enumerate(paths):
        _edit(path, lambda d: d["settings"].update(served={
            "model": "ckpt-a", "description": f"ckpt-a: stepped, {k + 1} trial(s) at once"}))
    assert merge(paths)["settings"]["served"]["model"] == "ckpt-a"
    _edit(paths[1], lambda d: d["settings"]["served"].update(model="ckpt-b"))
    with pytest.raises(MergeError, match="settings.served.model: 'ckpt-a' vs 'ckpt-b'"):
        merge(paths)


def test_overlapping_instances_are_refused(tmp_path):
    _, paths = _shards(tmp_path)
    first = json.loads(paths[0].read_text())
    _edit(paths[1], lambda d: d["instances"].append(first["instances"][0]))
    with pytest.raises(MergeError, match="is also in .*shard1.*must not overlap"):
        merge(paths)


def test_missing_shard_and_unreadable_files(tmp_path, capsys):
    _, paths = _shards(tmp_path)
    with pytest.raises(MergeError, match="missing shard\\(s\\) 2/3"):
        merge([paths[0], paths[2]])
    with pytest.raises(MergeError, match="no such file"):
        merge([tmp_path / "nope.json"])
    assert main(argparse.Namespace(reports=[str(paths[0])], output=str(tmp_path / "o.json"))) \
        == 2
    assert "missing shard(s) 2/3, 3/3" in capsys.readouterr().err


# --- incomplete or malformed shards (issue 22) -------------------------------------------

def _drop_instance(path, which=0):
    rep = json.loads(path.read_text())
    gone = rep["instances"].pop(which)["id"]
    path.write_text(json.dumps(rep))
    return gone


def test_an_instance_missing_from_every_report_refuses_the_merge_by_name(tmp_path):
    full, paths = _shards(tmp_path)
    for p in paths:  # each shard says what its selection held (a run with -k keeps that)
        rep = json.loads(p.read_text())
        rep["selected"] = [i["id"] for i in rep["instances"]]
        p.write_text(json.dumps(rep))
    gone = _drop_instance(paths[1])
    with pytest.raises(MergeError, match=f"1 selected instance.*{re.escape(str(paths[1]))}: "
                                         f"{gone}.*--allow-incomplete"):
        merge(paths)
    merged = merge(paths, allow_incomplete=True)
    assert merged["incomplete"] == [gone]
    assert merged["totals"]["instances"] == full["totals"]["instances"] - 1
    assert any(gone in n and "--allow-incomplete" in n for n in merged["notes"])


@pytest.mark.parametrize("instances, field", [
    ("x", "'instances'"), ([None], r"'instances\[0\]'"), ([{"no": "id"}], r"'instances\[0\]'"),
])
def test_malformed_instances_are_a_clear_error(tmp_path, instances, field):
    _, paths = _shards(tmp_path)
    rep = json.loads(paths[0].read_text())
    rep["instances"] = instances
    paths[0].write_text(json.dumps(rep))
    with pytest.raises(MergeError, match=f"{re.escape(str(paths[0]))}: field {field}"):
        merge(paths)


# --- timing tolerance: a merged trial is judged against the merged run's -------------------

def _clocked(path, tolerance, lag=5.0, late=()):
    """The shard as a streaming run at ``tolerance`` (ms, None: off) writes it; instances
    ``late`` (indices) scored with their trial ``796`` ms late."""
    def fn(d):
        for k, inst in enumerate(d["instances"]):
            worst = 796.0 if k in late else lag
            inst["clock"] = {"input_lag_max_ms": worst, "output_lag_max_ms": 0.0,
                             "loop_stall_max_ms": worst, "tolerance_ms": tolerance,
                             "reruns": 0, "unreliable": False}
        d["clock"] = {"trials": len(d["instances"]), "rerun": 0, "unreliable": 0,
                      "worst_lag_ms": 796.0 if late else lag,
                      "worst_scored_lag_ms": 796.0 if late else lag, "tolerance_ms": tolerance}
    _edit(path, fn)


def test_shards_at_one_tolerance_merge_and_the_report_states_it(tmp_path):
    _, paths = _shards(tmp_path, n=2)
    for p in paths:
        _clocked(p, 100.0)
    assert merge(paths)["clock"]["tolerance_ms"] == 100.0


def test_shards_at_different_tolerances_are_refused(tmp_path, capsys):
    _, paths = _shards(tmp_path, n=2)
    _clocked(paths[0], None, late=(0,))  # run with --duplexact-timing-tolerance=off
    _clocked(paths[1], 100.0)
    with pytest.raises(MergeError, match=re.escape(f"different timing tolerances ({paths[0]}: "
                                                   f"off, {paths[1]}: 100 ms)")):
        merge(paths)
    assert main(argparse.Namespace(reports=[str(p) for p in paths],
                                   output=str(tmp_path / "m.json"))) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--duplexact-timing-tolerance" in err


def test_a_scored_trial_over_the_tolerance_is_refused_by_name(tmp_path):
    """A shard whose report kept a late trial (an older release's resume): never counted."""
    _, paths = _shards(tmp_path, n=2)
    _clocked(paths[0], 100.0, late=(0,))
    _clocked(paths[1], 100.0)
    late = json.loads(paths[0].read_text())["instances"][0]
    assert late["error"] is None
    with pytest.raises(MergeError, match=re.escape(
            f"{paths[0]}: instance {late['id']} was scored although its trial ran 796 ms late, "
            "over the timing tolerance (100 ms)")):
        merge(paths)


@pytest.mark.parametrize("clock, field", [([1], "'clock'"), ({"tolerance_ms": "x"},
                                                              "'clock.tolerance_ms'")])
def test_a_malformed_clock_section_names_the_field(tmp_path, clock, field):
    _, paths = _shards(tmp_path, n=2)
    _edit(paths[1], lambda d: d.update(clock=clock))
    with pytest.raises(MergeError, match=re.escape(f"{paths[1]}: field {field}")):
        merge(paths)


def test_a_merged_channelled_run_has_the_unsharded_runs_robustness_section(tmp_path):
    """The section reads the run store: merge builds it again over the merged run (a shard's
    own section compared one shard only), equal to the unsharded run's."""
    from pytest_duplexact.data.results import InstanceOutcome
    from pytest_duplexact.report.model import Report
    from pytest_duplexact.report.sections import robustness
    from pytest_duplexact.report.store.saved import save
    from tests.report.helpers import outcomes_for

    def run(successes, **over):
        outs = outcomes_for("take_turn.delayed", 20, successes)
        outs += outcomes_for("wait.inter_sentential_pause", 20, 18)
        return report(outs, **over)

    store = tmp_path / "store"
    save(parsed(run(18)), store)  # the clean run
    full = run(3, channel="echo:-6@50")
    unsharded = robustness.section(parsed(full), robustness.stored_reports(store))
    assert unsharded["channels"][1]["flips_to_failure"] == 15
    paths = []
    for k in (1, 2):
        part = [InstanceOutcome.from_dict(d) for d in full["instances"]
                if shard_of(d["id"], 2) == k]
        rep = Report.from_json(report(part, channel="echo:-6@50", selection=_sel(f"{k}/2")))
        rep = rep.replace(robustness=robustness.section(parsed(rep),
                                                        robustness.stored_reports(store)))
        p = tmp_path / f"shard{k}.json"
        p.write_text(json.dumps(rep.to_json()))
        paths.append(p)
    assert json.loads(paths[0].read_text())["robustness"] != unsharded  # one shard's
    merged = merge(paths, store=store)
    expected = json.loads(json.dumps(unsharded))
    # the run's own row carries its report's date (volatile): the merge's, not the unsharded
    # report's, which is another second when the clock ticks between the two (seen under load)
    expected["channels"][1]["created"] = merged["created"]
    assert merged["robustness"] == expected
    # no store where the shards had one: no section, and a note says what to pass
    bare = merge(paths, store=tmp_path / "elsewhere")
    assert "robustness" not in bare
    assert bare["notes"][-1].endswith("pass --store DIR (the shards' --duplexact-storage "
                                      "folder)")
    # shards run without a store: no section, no note (the default bytes)
    for p in paths:
        _edit(p, lambda d: d.pop("robustness"))
    assert "robustness" not in merge(paths) and not merge(paths).get("notes")


# --- gating the merged run: --gate / --baseline -------------------------------------------

def _clean_shards(tmp_path):
    """Shards of mixed_report without its errored instance: a gate alone decides."""
    from pytest_duplexact.data.results import InstanceOutcome

    kept = [InstanceOutcome.from_dict(d) for d in mixed_report()["instances"]
            if d.get("error") is None]
    return _shards(tmp_path, full=report(kept))


def _cli(capsys, *args):
    from pytest_duplexact.cli import main as duplexact

    code = duplexact(["merge", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gates_on_the_merged_run_decide_the_exit_status(tmp_path, capsys):
    """A sharded release job could not be gated: each shard's gates judged one shard and the
    merge dropped them. The merge job now gates the merged run, with the same expressions."""
    _, paths = _clean_shards(tmp_path)
    out = tmp_path / "merged.json"
    code, said, _ = _cli(capsys, *paths, "-o", out, "--gate", "wait.I>=0.8",
                         "--gate", "stop.I>=90%")
    assert code == 0, said
    assert "Gates:\n  passed wait.I>=0.8: wait.I = 83.3%\n  passed stop.I>=90%" in said
    stored = json.loads(out.read_text())["gates"]
    assert [(g["gate"], g["passed"]) for g in stored] == [("wait.I>=0.8", True),
                                                          ("stop.I>=90%", True)]
    code, said, _ = _cli(capsys, *paths, "-o", out, "--gate", "wait.I>=0.9")
    assert code == 1 and "FAILED wait.I>=0.9" in said, said
    assert json.loads(out.read_text())["gates"][0]["passed"] is False  # written all the same


def test_an_error_in_the_merged_run_fails_its_gates(tmp_path, capsys):
    _, paths = _shards(tmp_path)  # mixed_report: one instance ended in an error
    code, said, _ = _cli(capsys, *paths, "-o", tmp_path / "m.json", "--gate", "wait.I>=0.5")
    assert code == 1
    assert "1 instance(s) ended in an error: the merged run does not pass" in said


def test_a_gated_incomplete_merge_never_exits_0(tmp_path, capsys):
    _, paths = _clean_shards(tmp_path)
    for p in paths:  # each shard says what its selection held
        rep = json.loads(p.read_text())
        rep["selected"] = [i["id"] for i in rep["instances"]]
        p.write_text(json.dumps(rep))
    _drop_instance(paths[0])
    code, said, _ = _cli(capsys, *paths, "-o", tmp_path / "m.json", "--allow-incomplete",
                         "--gate", "wait.I>=0.1")
    assert code == 1
    assert "the gates passed on an incomplete run (1 selected instance(s) have no outcome)" \
        in said


def test_a_baseline_gates_the_merged_run(tmp_path, capsys):
    full, paths = _clean_shards(tmp_path)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(full))
    code, said, _ = _cli(capsys, *paths, "-o", tmp_path / "m.json", "--baseline", base)
    assert code == 0, said
    assert "Baseline:" in said
    section = json.loads((tmp_path / "m.json").read_text())["baseline"]
    assert section["passed"] is True and section["alpha"] == 0.05
    assert "ignore_borderline" not in section
    code, _, _ = _cli(capsys, *paths, "-o", tmp_path / "m.json", "--baseline", base,
                      "--baseline-alpha", "0.01", "--ignore-borderline")
    section = json.loads((tmp_path / "m.json").read_text())["baseline"]
    assert code == 0 and section["alpha"] == 0.01 and section["ignore_borderline"] is True


@pytest.mark.parametrize("args,said", [
    (("--gate", "wait.X>=1"), "duplexact merge: --gate: cannot parse gate 'wait.X>=1'"),
    (("--gate", "wiat.I>=0.9"), "duplexact merge: --gate: gate 'wiat.I>=0.9': unknown action "
                                "'wiat' (did you mean 'wait'?)"),
    (("--baseline", "nope.json"), "duplexact merge: --baseline: "),
    (("--baseline-alpha", "1.5"), "duplexact merge: --baseline-alpha: baseline alpha must be "
                                  "in (0, 1), got 1.5"),
])
def test_a_bad_gate_or_baseline_is_one_line_and_merges_nothing(tmp_path, capsys, args, said):
    _, paths = _clean_shards(tmp_path)
    out = tmp_path / "m.json"
    code, _, err = _cli(capsys, *paths, "-o", out, *args)
    assert code == 2 and err.startswith(said), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_shards_of_two_counts_are_named_as_such_not_as_an_overlap(tmp_path):
    """1/2 and 1/3 share instances; the merge said "must not overlap", which sent the user
    looking for a duplicated shard instead of the run split two ways."""
    (tmp_path / "two").mkdir()
    (tmp_path / "three").mkdir()
    _, halves = _shards(tmp_path / "two", n=2)
    _, thirds = _shards(tmp_path / "three", n=3)
    with pytest.raises(MergeError) as e:
        merge([halves[0], thirds[0]])
    assert str(e.value) == (f"the reports come from different shard counts: {halves[0]} is "
                            f"1/2, {thirds[0]} is 1/3")
