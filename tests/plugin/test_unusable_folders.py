"""Folders a run cannot use are refused before it starts, in one line naming the option and
the fix, exit 4, leaving no run folder: ``recorded:`` on a folder that is not a run (it gave
an error per instance and a new run folder each time), and a run directory that cannot be
made (``/proc/x``, a path under a file: a bare ``[Errno 2]`` / ``[Errno 20]``).

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()

SMALL = ("--duplexact-condition=take_turn.delayed", "--duplexact-limit=2", "-p",
         "no:cacheprovider")


def _refused(pytester, *args) -> str:
    res = inproc(pytester, *args, *SMALL)
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert len(said) <= 2 and said[-1].startswith("ERROR: "), said  # the estimate, the line
    assert "Traceback" not in "\n".join(said) and "[Errno" not in said[-1], said
    assert not (pytester.path / "duplexact-runs").exists()
    return said[-1]


def test_recorded_on_a_folder_that_is_not_a_run(pytester):
    folder = Path(pytester.path, "not-a-run")
    folder.mkdir()
    (folder / "notes.txt").write_text("a folder of something else")
    line = _refused(pytester, f"--duplexact-model=recorded:{folder}")
    assert line.startswith(f"ERROR: --duplexact-model=recorded:{folder}: {folder} holds no "
                           "recording of the 2 selected instance(s)"), line
    assert "point recorded: at the run directory of an earlier run" in line


def test_a_run_dir_under_a_file(pytester):
    Path(pytester.path, "afile").write_text("x")
    line = _refused(pytester, "--duplexact-model=silent", "--duplexact-run-dir=afile/run")
    assert line == (f"ERROR: --duplexact-run-dir=afile/run: {Path(pytester.path, 'afile')} is "
                    "a file, so no folder can be made under it; choose a folder you can write "
                    "with --duplexact-run-dir=DIR")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_run_dir_that_cannot_be_made(pytester):
    line = _refused(pytester, "--duplexact-model=silent", "--duplexact-run-dir=/proc/x")
    assert line.startswith("ERROR: --duplexact-run-dir=/proc/x: cannot make the run directory "
                           "/proc/x ("), line
    assert line.endswith("choose a folder you can write with --duplexact-run-dir=DIR")


@pytest.mark.parametrize("where", ["afile/report.json", "afolder", "locked/report.json"])
def test_a_report_path_that_cannot_take_the_report(pytester, monkeypatch, where):
    """--duplexact-report is written at the run's end: a path that cannot hold it is refused
    before the run, not found after it (the run complete, exit 1, and for a folder a message
    naming the writer's temporary file)."""
    Path(pytester.path, "afile").write_text("x")
    Path(pytester.path, "afolder").mkdir()
    locked = Path(pytester.path, "locked")
    locked.mkdir()
    # read-only as the check sees it (root writes a 0o500 folder anyway; the run is in process)
    access = os.access
    monkeypatch.setattr(os, "access",
                        lambda p, mode: access(p, mode) and Path(p).resolve() != locked)
    line = _refused(pytester, "--duplexact-model=silent", f"--duplexact-report={where}")
    why = {"afile/report.json": "afile is a file, not a folder",
           "afolder": "afolder is a folder: give a file name, e.g. "
                      "--duplexact-report afolder/report.json",
           "locked/report.json": "no permission to write in locked"}[where]
    assert line == f"ERROR: cannot write --duplexact-report {where}: {why}", line


@pytest.mark.parametrize("storage,why", [
    ("afile", "afile is a file, not a folder"),
    ("afile/store", "afile is a file, not a folder"),
    ("locked/store", "no permission to write in locked"),
])
def test_an_autosave_store_that_cannot_keep_the_run(pytester, monkeypatch, storage, why):
    """--duplexact-autosave writes the store at the run's end: a store it cannot write was
    one WARNING line after the whole run; it is refused before the run now."""
    Path(pytester.path, "afile").write_text("x")
    locked = Path(pytester.path, "locked")
    locked.mkdir()
    access = os.access  # as above: root writes a read-only folder anyway
    monkeypatch.setattr(os, "access",
                        lambda p, mode: access(p, mode) and Path(p).resolve() != locked)
    line = _refused(pytester, "--duplexact-model=silent", "--duplexact-autosave",
                    f"--duplexact-storage={storage}")
    assert line == (f"ERROR: cannot keep runs in --duplexact-storage={storage}: {why}; give a "
                    "folder that can be written"), line


def test_a_store_that_is_not_there_yet_is_made(pytester):
    res = inproc(pytester, "--duplexact-model=silent", "--duplexact-autosave",
                 "--duplexact-storage=new/store", *SMALL)
    assert res.ret == pytest.ExitCode.TESTS_FAILED  # silent misses; the run was kept
    assert len(list(Path(pytester.path, "new", "store").glob("0001_*.json"))) == 1
