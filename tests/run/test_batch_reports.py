"""``--duplexact-batch=B`` changes how fast a run goes, never what it measures: the built-in
stepped models give byte-identical reports (report.json without its ``created`` stamp) and
per-instance files at B = 1, 4 and 16, serially and under ``-n 2``.

Serially, in process (``Harness.from_settings`` fed as the plugin's serial session feeds it:
each test submits itself and the next 2B instances; the terminal line is checked through
pytest below): silent, oracle and endpoint on 10 bundled instances, two of each of five
conditions (Direct Replay, Simulator Replay, barge-in), so B = 4 reuses slots and B = 16
holds them all (a subset of the 72, for the suite's time).
Through pytest: the silent model at B = 3 serially and B = 4 under ``-n 2`` against its
serial B = 1 run (the journal tests' baseline).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.report.builder import Ran, base
from pytest_duplexact.rules import requires
from pytest_duplexact.run.harness import Harness, RunKnobs
from pytest_duplexact.run.selection import Selection, select
from pytest_duplexact.run.settings import RunSettings
from tests.support.runs import CONDITIONS, SILENT, assert_same_report, read_report, runner

SIZES = (1, 4, 16)


def instance_files(run_dir: Path) -> dict[str, bytes]:
    root = run_dir / "instances"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def run_in_process(model: str, batch: int, run_dir: Path, cache: Path, insts) -> dict:
    settings = RunSettings(model=model)
    h = Harness.from_settings(settings, run_dir, RunKnobs(batch=batch, cache_dir=cache))
    try:
        outcomes = []
        for k, inst in enumerate(insts):
            if h.prefetcher is not None:  # as session.outcome does
                h.prefetcher.submit(insts[k: k + 1 + 2 * batch])
            outcomes.append(h.run(inst))
    finally:
        if h.prefetcher is not None:
            h.prefetcher.close()
    return base(Ran(outcomes, settings, model)).to_json()


@pytest.fixture(scope="module")
def selected():
    insts = select(load_dataset(bundled_root(), requires=requires).instances,
                   Selection(conditions=CONDITIONS, limit=2))
    assert len(insts) > 4 and {i.pipeline.value for i in insts} == {"direct", "simulator",
                                                                     "barge_in"}
    return sorted(insts, key=lambda i: (i.action, i.id))


@pytest.mark.parametrize("model", ["silent", "oracle", "endpoint"])
def test_reports_and_instance_files_are_the_same_at_every_batch_size(model, selected,
                                                                      tmp_path):
    cache = tmp_path / "cache"  # shared: identical audio is segmented once
    runs = {b: run_in_process(model, b, tmp_path / f"b{b}", cache, selected) for b in SIZES}
    assert runs[1]["totals"] == {"instances": len(selected), "errors": 0}
    files = {b: instance_files(tmp_path / f"b{b}") for b in SIZES}
    for b in SIZES[1:]:
        assert_same_report(runs[b], runs[1])
        assert files[b].keys() == files[1].keys()
        assert [k for k in files[1] if files[b][k] != files[1][k]] == [], b


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return runner(tmp_path_factory)


def test_the_plugin_batched_gives_the_unbatched_report_serially_and_under_xdist(runs, tmp_path):
    """The silent model (its workers start fast: no VAD); speech is the in-process test's."""
    base, status = runs.baseline(SILENT)
    serial, xdist = tmp_path / "serial", tmp_path / "xdist"
    # serially, with the ini key (-o sets it as a pytest.ini would)
    res = runs.run(SILENT, f"--duplexact-run-dir={serial}", "-o", "duplexact_batch=3",
                   "-p", "no:xdist")
    assert res.returncode == status, res.stdout + res.stderr
    line = ("duplexact: batched stepping, 3 trials per model step; a finished slot takes the "
            "next trial at once")
    assert res.stdout.count(line) == 2  # as the first trial starts, and in the summary
    res = runs.run(SILENT, f"--duplexact-run-dir={xdist}", "--duplexact-batch=4", "-n", "2")
    assert res.returncode == status, res.stdout + res.stderr
    baseline_dir = runs.home / "baseline-silent"
    for run_dir in (serial, xdist):
        assert_same_report(read_report(run_dir), base)
        assert instance_files(run_dir) == instance_files(baseline_dir)


def test_a_model_without_step_batch_is_refused_with_a_clear_error(tmp_path):
    from pytest_duplexact.run.settings import SettingsError

    class OneAtATime:
        sample_rate, frame_size = 16_000, 320

        def start(self, info): ...

        def step(self, frame): return frame

        def finish(self): ...

    with pytest.raises(SettingsError, match="--duplexact-batch=4: model 'mine' does not "
                                            "offer batched stepping"):
        Harness.from_settings(RunSettings(model="mine"), tmp_path, RunKnobs(batch=4),
                              model=OneAtATime())
