"""Reports never lost to concurrency: runs saving to one store at once, and runs starting at
once with the default run directory (a claim, not a check then a create)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from pytest_duplexact.report.model import Report
from pytest_duplexact.report.store import saved as store

WRITERS = 8


def _save(folder: str, k: int, barrier) -> None:
    barrier.wait()
    store.save(Report.from_json({"model": f"m{k}", "created": "2026-12-01T10:00:00Z", "k": k}),
               Path(folder))


def test_eight_processes_saving_at_once_each_keep_their_report(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_save, args=(str(tmp_path), k, barrier))
             for k in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    numbers = [n for n, _ in store.entries(tmp_path)]
    assert numbers == list(range(1, WRITERS + 1))


def _start(folder: str, barrier, out) -> None:
    from pytest_duplexact.pytest_plugin.config import RunConfig
    from pytest_duplexact.pytest_plugin.configure import resolve_run_dir
    from pytest_duplexact.run.runlock import RunLock

    barrier.wait()
    # no option set: the default run directory under the invocation folder
    run_dir = resolve_run_dir(RunConfig(model="oracle", invocation_dir=Path(folder)))
    RunLock.acquire(run_dir)  # what the session does next; "in use by another run" if shared
    out.put(str(run_dir))


def test_runs_starting_at_once_each_claim_their_own_default_run_dir(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_start, args=(str(tmp_path), barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    dirs = {out.get(timeout=5) for _ in range(4)}
    assert len(dirs) == 4


def test_a_run_refused_at_preflight_leaves_no_default_run_dir(pytester):
    """The default run dir is claimed before the preflight checks; a refused run removes it."""
    res = pytester.runpytest("--duplexact-model=silent", "--duplexact-baseline=nothing.json",
                             "-p", "no:cacheprovider", "-p", "no:randomly")
    assert res.ret == 4
    runs = pytester.path / "duplexact-runs"
    assert not runs.exists() or list(runs.iterdir()) == []


def _stored(folder: Path, *models: str) -> list[Path]:
    return [store.save(Report.from_json({"model": m, "created": "2026-12-01T10:00:00Z"}),
                       folder) for m in models]


def test_latest_is_this_models_latest_in_a_shared_store(tmp_path):
    """Two models' runs in one store (two checkpoints' jobs on one CI runner): "latest" was
    whichever finished last, so one model was gated on the other's run."""
    a1, b1, a2, b2 = _stored(tmp_path, "mypkg.model:factory", "oracle",
                             "mypkg.model:factory", "oracle")
    assert store.find(tmp_path, "latest", model="mypkg.model:factory") == a2
    assert store.find(tmp_path, "latest", model="oracle") == b2
    assert store.find(tmp_path, "latest") == b2  # no model: the store's latest
    assert store.find(tmp_path, "3", model="oracle") == a2  # a number is taken as given


def test_latest_of_a_model_the_store_has_not_seen_says_what_it_has(tmp_path):
    import pytest

    _stored(tmp_path, "oracle")
    with pytest.raises(store.StoreError) as e:
        store.find(tmp_path, "latest", model="silent")
    assert str(e.value) == (
        f"no stored run of silent in {tmp_path} (the latest: 0001_oracle_20261201T100000"
        ".json); store one with --duplexact-autosave, or name a stored run by its number to "
        "compare with another model's")



def test_latest_never_takes_a_model_whose_name_extends_or_shares_the_slug(tmp_path):
    """The whole slug is compared, then the stored report's own model: ``small`` is not
    ``small_v2``, and two long specs cut to one 60-character slug are told apart."""
    base = "company.research.speech.duplex.models.checkpoints.factories:build_"
    small, v2, long_a, long_b = _stored(tmp_path, "mypkg.models:small", "mypkg.models:small_v2",
                                        base + "a", base + "b")
    assert store.slug(base + "a") == store.slug(base + "b")
    assert store.find(tmp_path, "latest", model="mypkg.models:small") == small
    assert store.find(tmp_path, "latest", model="mypkg.models:small_v2") == v2
    assert store.find(tmp_path, "latest", model=base + "a") == long_a
    assert store.find(tmp_path, "latest", model=base + "b") == long_b


def test_a_store_under_a_folder_that_cannot_be_entered_is_one_line(tmp_path, monkeypatch):
    """Path.exists raises PermissionError for EACCES (root cannot be refused one, so the
    refusal is simulated): a refusal to name, not a traceback at preflight."""
    import os

    locked = tmp_path / "locked"
    real_stat = os.stat

    def stat(path, *a, **kw):
        if str(path).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(os, "stat", stat)
    said = store.store_problem(locked / "store", tmp_path)
    assert said == ("cannot keep runs in --duplexact-storage=locked/store: cannot look into "
                    "locked/store (Permission denied); give a folder that can be written")
