"""inner_runs.run in process: a run that passes its deadline ends its test process with every
thread's stack in the run's folder (never a hung CI job), and a run that does not ask for
--reruns leaves no pytest-rerunfailures thread behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.support.inner_runs import AS_USER, STACKS, run

HANGING = textwrap.dedent("""
    import time
    from tests.support.inner_runs import run

    def test_outer(pytester):
        pytester.makepyfile(test_inner="import time\\ndef test_hang():\\n    time.sleep(120)\\n")
        run(pytester, "-p", "no:cacheprovider", inprocess=True, timeout=1.0)
""")


def test_an_in_process_run_past_its_deadline_ends_its_process_with_the_stacks(tmp_path):
    (tmp_path / "test_outer.py").write_text(HANGING)
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not a worker
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytester", "-p", "no:cacheprovider", "-q",
         f"--basetemp={tmp_path / 'base'}", str(tmp_path / "test_outer.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=110,
        env={**env, "PYTHONPATH": str(root)})
    assert proc.returncode != 0 and "passed" not in proc.stdout  # ended, not finished
    [stacks] = (tmp_path / "base").rglob(STACKS)
    text = stacks.read_text()
    assert "Timeout" in text and "test_hang" in text  # where the inner run hung


def test_an_in_process_run_leaves_no_rerunfailures_thread(pytester):
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    before = {t.ident for t in threading.enumerate()}
    # as a user's folder, as the suite's in-process runs are (this folder has no ini to set
    # pytest-asyncio's loop scope, so it would warn)
    res = run(pytester, "-p", "no:cacheprovider", *AS_USER, inprocess=True)
    assert res.ret == 0
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not left, left
