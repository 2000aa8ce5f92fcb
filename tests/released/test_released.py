"""The released benchmark as input (docs/released-data.md): a snapshot in exactly the dataset
card's layout (tests/released/snapshot_builder.py, 24 kHz, built from the bundled fixtures)
run end to end from a folder and through the real huggingface_hub client against a fake hub
on 127.0.0.1; the grouped report of an incomplete mapping; ``duplexact inspect``; the oracle's
refusal without model-side clips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_duplexact.data import audio, taxonomy
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.released import ReleasedDataError, resolve_data
from pytest_duplexact.rules import requires
from tests.fakes.hf_hub import COMMIT, FakeHub
from tests.released.snapshot_builder import CONFIG_OF, RATE, TEST_MAPPING, build
from tests.support.runs import read_report

REPO = "LincolnD/DuplexAct"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("released")
    held = build(root / "snap")
    (root / "mapping.toml").write_text(TEST_MAPPING)
    return root / "snap", root / "mapping.toml", held


def _check_run(rep: dict, held: dict) -> None:
    ids = [o["id"] for o in rep["instances"]]
    assert len(ids) == sum(len(v) for v in held.values())
    assert {o["action"] for o in rep["instances"]} == set(taxonomy.ACTIONS)
    assert rep["totals"]["errors"] == 0
    assert {o["corpus"] for o in rep["instances"]} == {"synthesized", "AMI", "Loqui"}
    assert set(rep["summary"]["corpora"]) == {"synthesized", "AMI", "Loqui"}
    assert rep["settings"]["released"]["source_sample_rates"] == {str(RATE): 24}  # clip uses
    assert rep["settings"]["bargein_branches"] == "on"  # the data has branch clips
    cmp = rep["paper_comparison"]
    assert cmp["covered"] == len(ids) and cmp["paper_instances"] == 4691
    assert cmp["comparisons"] and all("p_adjusted" in r for r in cmp["comparisons"])


def test_folder_snapshot_runs_end_to_end_across_all_actions(pytester, snapshot, cache):
    snap, mapping, held = snapshot
    res = pytester.runpytest(f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
                             "--duplexact-model=endpoint", "--duplexact-report=report.json",
                             "-p", "no:cacheprovider", "-p", "no:randomly")
    assert res.ret in (0, 1), res.stdout.str()
    rep = read_report(pytester.path)
    _check_run(rep, held)
    # converted once, at 16 kHz mono, the 24 kHz source rate recorded per instance
    ds = load_dataset(rep["settings"]["dataset"], requires=requires)
    assert all({"branch_acknowledged", "branch_ignored"} <= set(i.clips)
               for i in ds.instances if i.action == "interrupt")
    for inst in ds.instances:
        assert inst.extra["released"]["source_sample_rate"]
        assert set(inst.extra["released"]["source_sample_rate"].values()) == {RATE}
        for clip in inst.clips.values():
            assert audio.info(clip.path)[:2] == (audio.SAMPLE_RATE, 1)
    # annotations survive the ms / samples round trip (to the sample at 24 kHz)
    fixtures = {i.id: i for i in load_dataset(bundled_root(), requires=requires).instances}
    for inst in ds.instances:
        src = fixtures[inst.id.split("-", 1)[1]]
        for name in ("user_start", "user_end", "pause_start", "other_end", "cue_start",
                     "cue_end", "interrupt_target"):
            a, b = getattr(inst.annotations, name), getattr(src.annotations, name)
            assert (a is None) == (b is None), (inst.id, name)
            if a is not None:
                assert abs(a - b) <= 1.0 / RATE, (inst.id, name, a, b)
    assert "wait-wait-inter_sentential_pause-casual-01" in {i.id for i in ds.instances}
    # every view shows the per-corpus rates and the paper side by side
    from pytest_duplexact.cli import main

    assert main(["report", str(pytester.path / "report.json"), "--html", "page.html",
                 "--markdown", "pr.md", "--audio", "none"]) == 0
    page = (pytester.path / "page.html").read_text()
    assert 'id="corpora"' in page and 'id="paper-comparison"' in page
    assert "U: unspecified (the data does not say)" in page
    assert [o["scenario"] for o in rep["instances"] if o["action"] == "interrupt"].count(
        "unspecified") == 1
    assert "unspecified" in rep["summary"]["actions"]["interrupt"]["scenarios"]
    assert "this run covers 15 of the paper&#x27;s 4691 instances" in page
    text = (pytester.path / "pr.md").read_text()
    assert "### Corpora" in text and "| Loqui |" in text
    assert "covers 15 of the paper's 4691 instances; the 1235 Candor" in text
    out = res.stdout.str()
    assert "Per corpus (I / S (n_S))" in out and "paper side by side" in out


@pytest.mark.slow
def test_download_through_a_fake_hub_and_second_run_makes_no_request(pytester, snapshot,
                                                                      cache, tmp_path,
                                                                      monkeypatch):
    snap, mapping, held = snapshot
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    args = [f"--duplexact-data=hf:{REPO}", f"--duplexact-data-mapping={mapping}",
            "--duplexact-model=endpoint", "--duplexact-report=report.json",
            "-p", "no:cacheprovider", "-p", "no:randomly"]
    with FakeHub(REPO, snap) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        first = pytester.runpytest_subprocess(*args, timeout=300)
        assert first.ret in (0, 1), first.stdout.str() + first.stderr.str()
        rep1 = read_report(pytester.path)
        _check_run(rep1, held)
        assert rep1["settings"]["released"]["revision"] == COMMIT
        got = [p for m, p in hub.requests if "/resolve/" in p and m == "GET"]
        assert sorted(p.split("/resolve/")[1].split("/", 1)[1] for p in got) == \
            sorted(f"{c}/test-00000-of-00001.parquet" for c in CONFIG_OF.values())  # no README
        n = len(hub.requests)
        converted = Path(rep1["settings"]["dataset"])
        stamp = (converted / "instances.jsonl").stat().st_mtime_ns
        second = pytester.runpytest_subprocess(*args, timeout=300)
        assert second.ret in (0, 1), second.stdout.str() + second.stderr.str()
        assert hub.requests[n:] == []  # no request at all
        rep2 = read_report(pytester.path)
        assert rep2["settings"]["dataset"] == str(converted)
        assert (converted / "instances.jsonl").stat().st_mtime_ns == stamp  # reused
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline with the snapshot cached: fine
        third = pytester.runpytest_subprocess(*args, "--collect-only", "-q", timeout=300)
        assert third.ret == 0, third.stderr.str()
        assert len([ln for ln in third.stdout.lines if "::" in ln]) == 15
        assert hub.requests[n:] == []
    # offline with nothing cached: one clear error, no traceback
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    res = pytester.runpytest_subprocess(*args, timeout=300)
    assert res.ret == 4
    assert "HF_HUB_OFFLINE is set and the HF cache has no complete snapshot" in \
        res.stderr.str()


def test_incomplete_mapping_is_reported_grouped_and_refused(pytester, snapshot, cache, tmp_path):
    snap, mapping, held = snapshot
    bad = tmp_path / "bad"
    build(bad, drop_key="cue_on")  # cue_start cannot be found in any simulator config
    res = pytester.runpytest(f"--duplexact-data=hf:{bad}", f"--duplexact-data-mapping={mapping}",
                             "--duplexact-model=endpoint", "-p", "no:cacheprovider")
    assert res.ret == 4
    err = res.stderr.str()
    assert "cannot place 5 of 15 row(s)" in err
    for cfg, n in (("hold_floor", 2), ("respond_and_recover", 2), ("stop", 1)):
        assert f"config {cfg}, annotations.cue_start: {n} row(s)" in err
    assert "none of the keys ['cue_on'] present" in err
    assert "metadata keys present: cue_off, cue_text, reference_text, sample_id, scenario, " \
        "times" in err
    assert "annotations.cue_end" not in err and "config wait" not in err
    assert not [p for p in (cache / "released").iterdir() if p.is_dir()]  # nothing converted
    # with the switch: converted without them, and the run's settings list them
    root = resolve_data(f"hf:{bad}", mapping, skip_unmappable=True)
    from pytest_duplexact.pytest_plugin.released_data import describe

    d = describe(root, f"hf:{bad}")
    assert d["unmappable"] == 5 and d["instances"] == 10
    assert sorted(d["unmappable_ids"]) == sorted(
        f"{c}-{i}" for c in ("stop", "hold_floor", "respond_and_recover") for i in held[c])
    with pytest.raises(ReleasedDataError, match="cannot place 5 of 15"):
        resolve_data(f"hf:{bad}", mapping, skip_unmappable=False)  # the cache refuses too


def test_inspect_prints_what_a_mapping_needs(snapshot, capsys):
    from pytest_duplexact.cli import main

    snap, _, _ = snapshot
    assert main(["inspect", f"hf:{snap}"]) == 0
    out = capsys.readouterr().out
    print(out)  # shown with -s: the output a user completes the mapping from
    assert f"snapshot {snap}: 15 rows in 8 config(s)" in out
    assert "config turn_taking -> action take_turn: 2 rows (turn_taking/test-00000-of-00001." \
        "parquet)" in out
    assert "columns: condition: string, dataset: string, metadata: string, input: " \
        "struct<bytes: binary, path: string>" in out
    assert "audio input: 2 clips (24000 Hz x2; 1 ch x2), duration" in out
    assert "audio lead_in: empty in all 2 rows" in out
    assert "condition: 'Inter Sentential Pause' x1, 'Intra Sentential Pause' x1" in out
    assert "dataset: 'synthesized' x1, 'AMI' x1" in out
    assert "times.user_onset_ms: 2/2 rows, e.g. 300.0" in out
    assert 'cue_on: 1/1 rows, e.g. ' in out


def test_oracle_refuses_a_dataset_without_model_side_clips(pytester, snapshot, cache):
    snap, mapping, _ = snapshot
    res = pytester.runpytest(f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
                             "--duplexact-model=oracle", "-p", "no:cacheprovider")
    assert res.ret == 4
    err = res.stderr.str()
    assert err.count("--duplexact-model=oracle: the oracle performs each instance with its "
                     "model-side clips") == 1
    assert "2 wait instance(s) without 'reference'" in err
    assert "2 backchannel instance(s) without 'backchannel'" in err
    assert "PASSED" not in res.stdout.str()


def test_corpus_selection(pytester, snapshot, cache):
    snap, mapping, _ = snapshot
    res = pytester.runpytest(f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
                             "--duplexact-model=silent", "--duplexact-corpus=AMI",
                             "--collect-only", "-q", "-p", "no:cacheprovider")
    lines = [ln for ln in res.stdout.lines if "::" in ln]
    # the 15 rows cycle synthesized / AMI / Loqui: 5 are AMI
    assert len(lines) == 5, res.stdout.str()
    res = pytester.runpytest(f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
                             "--duplexact-model=silent", "--duplexact-corpus=Switchboard",
                             "--collect-only", "-p", "no:cacheprovider")
    assert res.ret == 4 and "unknown corpus 'Switchboard'" in res.stderr.str()


def test_import_command(snapshot, tmp_path, capsys):
    from pytest_duplexact.cli import main

    snap, mapping, _ = snapshot
    out = tmp_path / "out"
    assert main(["import", str(snap), "--out", str(out), "--mapping", str(mapping)]) == 0
    assert "valid duplexact-dataset v1" in capsys.readouterr().out
    header = json.loads((out / "dataset.json").read_text())
    assert header["released"]["instances"] == 15 and header["released"]["unmappable"] == 0
    assert main(["import", str(snap), "--out", str(out), "--mapping", str(mapping)]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    fresh = tmp_path / "fresh"
    assert main(["import", f"hf:{snap}", "--out", str(fresh)]) == 1  # bundled mapping only
    err = capsys.readouterr().err
    assert "cannot place 15 of 15 row(s)" in err and "config wait, annotations.user_start" in err
    assert not fresh.exists()


def test_unreadable_audio_is_an_unmappable_row(snapshot, tmp_path, cache):
    """A corrupt audio struct is reported like any other unplaceable field, not a crash."""
    import pyarrow.parquet as pq

    snap, mapping, held = snapshot
    bad = tmp_path / "bad"
    build(bad)
    f = bad / "wait" / "test-00000-of-00001.parquet"
    t = pq.read_table(f)
    rows = t.to_pylist()
    rows[1]["input"] = {"path": "x.wav", "bytes": b"RIFF not really a wav"}
    pq.write_table(type(t).from_pylist(rows, schema=t.schema), f)
    with pytest.raises(ReleasedDataError) as e:
        resolve_data(f"hf:{bad}", mapping, skip_unmappable=False)
    msg = str(e.value)
    assert "cannot place 1 of 15 row(s)" in msg
    assert f"config wait, audio.user: 1 row(s) [wait-{held['wait'][1]} (wait/test-00000-of-" \
        "00001.parquet row 1)]: column input: unreadable audio (LibsndfileError" in msg
    root = resolve_data(f"hf:{bad}", mapping, skip_unmappable=True)
    assert len(load_dataset(root, requires=requires).instances) == 14


def test_shards_of_a_released_data_run_merge_to_the_unsharded_report(pytester, snapshot, cache):
    """A merged report of a released-data run has every section the unsharded run's has,
    the paper side by side included (report/builder.py ``build``, called by the plugin and
    merge)."""
    from pytest_duplexact.report import VOLATILE_KEYS
    from pytest_duplexact.report.store.merge import PROVENANCE_KEYS, merge

    snap, mapping, _ = snapshot
    sel = [f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
           "--duplexact-model=silent", "--duplexact-action=wait,take_turn",
           "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
    pytester.runpytest(*sel, "--duplexact-run-dir=full", "--duplexact-report=full.json")
    full = json.loads(Path(pytester.path, "full.json").read_text())
    paths = []
    for k in (1, 2, 3):
        pytester.runpytest(*sel, f"--duplexact-shard={k}/3", f"--duplexact-run-dir=shard{k}")
        paths.append(pytester.path / f"shard{k}" / "report.json")
    merged = merge(paths)
    assert max(s["instances"] for s in merged["shards"]) < 4  # really split
    assert full["totals"]["instances"] == 4 and full["paper_comparison"]["covered"] == 4
    skip = set(VOLATILE_KEYS + PROVENANCE_KEYS)
    assert sorted(set(merged) - skip) == sorted(set(full) - skip)
    for key in sorted(set(full) - skip):  # section by section, so a failure names it
        assert merged[key] == full[key], key
