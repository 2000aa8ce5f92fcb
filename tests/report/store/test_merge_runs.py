"""End to end through pytest: shard runs merged equal the unsharded run; the baseline gate
stays quiet on a replay of the same recordings and fires on a model made worse on one
condition. Runs pytest in-process (pytester) on small selections, to stay fast."""


from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

# The VAD's native modules, imported once here: an in-process pytester run drops every module
# it imported when it ends, and torch cannot be imported twice into one process.
import silero_vad  # noqa: F401
import torch  # noqa: F401

from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.report.store.merge import PROVENANCE_KEYS, merge
from tests.support.inner_runs import runner
from tests.support.runs import replicated_dataset

QUIET = ["-p", "no:cacheprovider", "-q"]

WORSE = textwrap.dedent('''
    """The oracle, but silent on take_turn.delayed: a deliberately worse model."""
    import numpy as np

    from pytest_duplexact.models.providers.oracle import OracleModel

    class SilentWhenDelayed(OracleModel):
        def start(self, info):
            super().start(info)
            self._mute = info.instance.condition == "delayed"

        def step(self, frame):
            out = super().step(frame)
            if self._mute:
                return np.zeros(len(out.audio), dtype=np.float32)
            return out

    def factory(**options):
        return SilentWhenDelayed(**options)
''')


def _comparable(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k not in VOLATILE_KEYS + PROVENANCE_KEYS}


_run = runner(*QUIET, inprocess=True)


def test_three_shards_merge_to_the_unsharded_report(pytester):
    sel = ["--duplexact-model=oracle", "--duplexact-action=take_turn,stop",
           "--duplexact-limit=2"]
    res = _run(pytester, *sel, "--duplexact-run-dir=full", "--duplexact-report=full.json")
    res.assert_outcomes(passed=8)
    paths = []
    for k in (1, 2, 3):
        _run(pytester, *sel, f"--duplexact-shard={k}/3", f"--duplexact-run-dir=shard{k}")
        paths.append(pytester.path / f"shard{k}" / "report.json")
    full = json.loads((pytester.path / "full.json").read_text())
    merged = merge(paths)
    assert _comparable(merged) == _comparable(full)
    assert [s["instances"] for s in merged["shards"]] != [8, 0, 0]  # really split
    assert all(s["run_dir"] for s in merged["shards"])  # the HTML view finds the audio


@pytest.fixture
def replicated_data(tmp_path) -> Path:
    """The bundled take_turn.delayed instances, each twice (new ids, same audio): 6 trials
    of one condition, enough for a drop from 6/6 to 0/6 to be significant at 0.1 (paired,
    McNemar's exact p = 1/32)."""
    return replicated_dataset(tmp_path / "data", "take_turn", "delayed", copies=2)


def test_baseline_gate_quiet_on_replay_fires_on_worse_model(pytester, replicated_data):
    data = f"--duplexact-data={replicated_data}"
    res = _run(pytester, "--duplexact-model=oracle", data, "--duplexact-run-dir=base")
    res.assert_outcomes(passed=6)
    base = pytester.path / "base"
    baseline = f"--duplexact-baseline={base / 'report.json'}"

    # the same recordings replayed: nothing dropped, the run passes
    res = _run(pytester, f"--duplexact-model=recorded:{base}", data, baseline,
               "--duplexact-run-dir=replay")
    assert res.ret == 0
    rep = json.loads((pytester.path / "replay" / "report.json").read_text())
    assert rep["baseline"]["passed"] and rep["baseline"]["drops"] == []
    assert all(r["delta"] == 0 for r in rep["baseline"]["comparisons"])
    res.stdout.fnmatch_lines(["*passed baseline: no significant drop in 2 comparison(s)*"])

    # silent on take_turn.delayed: 6/6 -> 0/6 on the same instances, so paired: 6 discordant
    # pairs all one way, McNemar's exact p = 2 / 2**6 (Holm over the 2 comparisons: 1/16)
    pytester.makepyfile(worse=WORSE)
    pytester.syspathinsert()
    res = _run(pytester, "--duplexact-model=worse:factory", data, baseline,
               "--duplexact-baseline-alpha=0.1", "--duplexact-run-dir=worse")
    assert res.ret == 1
    rep = json.loads((pytester.path / "worse" / "report.json").read_text())
    b = rep["baseline"]
    assert not b["passed"] and b["alpha"] == 0.1 and b["pairing"] == "paired"
    assert b["drops"] == ["take_turn.I", "take_turn.delayed.I"]
    row = next(r for r in b["comparisons"] if r["target"] == "take_turn.delayed.I")
    assert row["delta"] == -1.0 and row["test"] == "mcnemar-exact"
    assert row["discordant"] == {"worse": 6, "better": 0}
    assert row["p_value"] == pytest.approx(1 / 32) and row["p_adjusted"] == pytest.approx(1 / 16)
    assert row["ci"][0] == -1.0 and row["ci"][1] < 0
    assert len(b["flips"]) == 6 and {f["direction"] for f in b["flips"]} == {
        "success->failure"}
    res.stdout.fnmatch_lines([
        "*FAILED baseline: 2 of 2 comparison(s) dropped significantly against oracle (*paired*",
        "*paired on the 6 instance(s) both runs share*",
        "*dropped take_turn.delayed.I: 100.0% -> 0.0% (-100.0 points *95% CI -100.0, *; "
        "6 pairs: 6 worse, 0 better), p = 0.031*",
        "*6 flip(s): 6 success->failure, 0 failure->success*",
    ])


def test_unusable_baseline_is_a_usage_error(pytester, tmp_path):
    res = _run(pytester, "--duplexact-model=silent", "--duplexact-action=stop",
               f"--duplexact-baseline={tmp_path / 'missing.json'}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--duplexact-baseline: baseline *missing.json: no such file*"])
    res = _run(pytester, "--duplexact-model=silent", "--duplexact-action=stop",
               "--duplexact-baseline-alpha=lots")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--duplexact-baseline-alpha*expected a number*"])


def test_auto_shards_from_a_job_array_merge_by_glob(pytester, monkeypatch, capsys):
    """Three array tasks (Slurm-style env), default run directories named by shard, then
    ``duplexact merge 'duplexact-runs/*/report.json'``: the unsharded report."""
    import argparse

    from pytest_duplexact.report.store.merge import main as merge_main

    sel = ["--duplexact-model=silent", "--duplexact-action=take_turn,wait"]
    _run(pytester, *sel, "--duplexact-run-dir=full", "--duplexact-report=full.json")
    for task in range(3):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
        monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "0")
        _run(pytester, *sel, "--duplexact-shard=auto")
    runs = sorted(p.name for p in (pytester.path / "duplexact-runs").iterdir())
    assert [r[-9:] for r in runs] == ["shard1of3", "shard2of3", "shard3of3"]
    out = pytester.path / "merged.json"
    code = merge_main(argparse.Namespace(
        reports=[str(pytester.path / "duplexact-runs" / "*" / "report.json")], output=str(out)))
    assert code == 0, capsys.readouterr().err
    full = json.loads((pytester.path / "full.json").read_text())
    assert _comparable(json.loads(out.read_text())) == _comparable(full)
    code = merge_main(argparse.Namespace(reports=[str(pytester.path / "nothing-*.json")],
                                         output=str(out)))
    assert code == 2 and "matches no file" in capsys.readouterr().err
