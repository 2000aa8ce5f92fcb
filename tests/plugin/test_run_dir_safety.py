"""A run directory belongs to one run: an explicit one that holds another run is refused (it
would be overwritten), a second process on a folder in use is refused naming the holder,
--duplexact-resume decides the folder alone, and a resume over tampered outcomes re-runs them
and still writes its report.

The plugin runs in process, as tests/plugin/test_first_day.py's do (but for the folder in use,
which another process must find locked, and the full disk, whose conftest patches os.replace):
each builds its own config and session (plugins from their entry points, exit status, terminal
output, files) as a new pytest process does, without a process start's ~2 CPU-s. A user's
folder has no asyncio ini: pytest-asyncio is off in them."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_duplexact.run.runlock import RunLock
from tests.support.inner_runs import as_user, runner

SMALL = ["--duplexact-condition=take_turn.delayed", "--duplexact-limit=1", "-p",
         "no:cacheprovider"]


run = as_user(*SMALL)
# a process of its own: where the test's process holds the run lock ("another run"), and where
# a conftest patches os.replace (that would outlive an in-process run)
run_elsewhere = runner(*SMALL)


def test_an_explicit_run_dir_holding_another_run_is_refused(pytester):
    first = run(pytester, "--duplexact-model=silent", "--duplexact-run-dir=runs/a")
    assert first.ret == 1  # silent fails take_turn: a normal run
    before = Path(pytester.path, "runs/a/report.json").read_bytes()
    again = run(pytester, "--duplexact-model=endpoint", "--duplexact-run-dir=runs/a")
    assert again.ret == 4  # usage error, nothing run
    err = again.stderr.str()
    assert "is not empty (it holds a run of model 'silent')" in err
    assert "--duplexact-resume=runs/a" in err
    assert Path(pytester.path, "runs/a/report.json").read_bytes() == before


def test_resume_and_another_run_dir_together_are_refused(pytester):
    res = run(pytester, "--duplexact-model=silent", "--duplexact-resume=x",
              "--duplexact-run-dir=y")
    assert res.ret == 4 and "drop --duplexact-run-dir" in res.stderr.str()


def test_a_run_dir_in_use_is_refused_naming_the_holder(pytester):
    folder = Path(pytester.path, "busy")
    lock = RunLock.acquire(folder)  # this process plays the other run
    try:
        res = run_elsewhere(pytester, "--duplexact-model=silent",
                            f"--duplexact-run-dir={folder}")
    finally:
        lock.release()
    assert res.ret == 4
    err = res.stderr.str()
    assert "is in use by another run (pid " in err and "pytest" in err


def test_a_resume_over_tampered_outcomes_reruns_them_and_writes_its_report(pytester):
    assert run(pytester, "--duplexact-model=endpoint", "--duplexact-run-dir=r").ret == 0
    (outcome,) = Path(pytester.path, "r/instances").glob("*/outcome.json")
    good = json.loads(outcome.read_text())
    outcome.write_text(json.dumps({**good, "timing": "zz", "usage": "lots"}))
    res = run(pytester, "--duplexact-model=endpoint", "--duplexact-resume=r")
    assert res.ret == 0, res.stdout.str()
    assert "1 damaged entry(ies) re-run" in res.stdout.str()
    report = json.loads(Path(pytester.path, "r/report.json").read_text())
    (inst,) = report["instances"]
    assert inst["immediate"] == good["immediate"] and inst["timing"] == good["timing"]


FULL_DISK = '''
import errno, os
import pytest_duplexact.data.atomic as atomic

_replace = os.replace


def replace(src, dst, *a, **kw):
    if str(dst).endswith(("report.json", "error.txt")) or "CRASH-DISK" in str(dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    return _replace(src, dst, *a, **kw)


atomic.os.replace = replace
'''


def test_a_full_disk_is_one_clear_error_and_leaves_no_temporary_files(pytester):
    pytester.makeconftest(FULL_DISK)  # patches os.replace: in a process of its own
    res = run_elsewhere(pytester, "--duplexact-model=endpoint", "--duplexact-run-dir=r")
    out = res.stdout.str()
    assert res.ret == 1
    assert "duplexact: ERROR: could not write" in out and "No space left on device" in out
    assert "--duplexact-resume=" in out
    assert "INTERNALERROR" not in out + res.stderr.str()
    assert not list(Path(pytester.path, "r").rglob("*.part"))
    assert list(Path(pytester.path, "r/instances").glob("*/outcome.json"))  # kept
