"""Long runs never lose work (docs/runs.md): a run stopped by Ctrl-C, by SIGKILL of pytest, or
by SIGKILL of one pytest-xdist worker, then resumed with --duplexact-resume, gives the report
an uninterrupted run gives (apart from ``created``); harness errors are retried.

Real processes and real signals, on five small instances of the bundled set played by
slowed-down test models (tests/support/runs.py), so each kill lands mid-run.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support.runs import (
    ORACLE,
    SILENT,
    assert_same_report,
    child_pids,
    finished,
    read_report,
    runner,
    selected_ids,
    wait_until,
)

pytestmark = pytest.mark.slow
# Under xdist the victim must still be mid-instance when the first outcome appears: give each
# instance long enough that a busy machine's polling lag cannot let a worker run dry first.
XDIST_DELAY = "1.5"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return runner(tmp_path_factory)


def test_ctrl_c_then_sigkill_then_resume_equals_an_uninterrupted_run(runs, tmp_path):
    ids = selected_ids()
    run_dir = tmp_path / "run"
    base, _ = runs.baseline(ORACLE)

    # each signal lands while the run is held at a gate (journal_model.py): exactly there,
    # however loaded the machine (a fixed delay per instance once let a run finish first)
    gate = tmp_path / "gate"
    gate.mkdir()
    for i in ids[2:]:
        (gate / f"hold-{i}").touch()

    # 1. The first instance crashes (a harness error); Ctrl-C lands after the next one.
    log = tmp_path / "first.log"
    proc = runs.start(log, ORACLE, f"--duplexact-run-dir={run_dir}",
                      DUPLEXACT_TEST_GATE=str(gate), DUPLEXACT_TEST_CRASH=ids[0])
    wait_until(lambda: (gate / f"at-{ids[2]}").exists(), proc, log)
    proc.send_signal(signal.SIGINT)
    assert runs.stopped_or_explained(proc, log) == pytest.ExitCode.INTERRUPTED, log.read_text()
    done = finished(run_dir)
    assert done == 2, "the interrupt did not land mid-run"
    partial = read_report(run_dir)  # Ctrl-C still writes the report of what finished...
    assert partial["totals"]["errors"] == 1
    assert any("have no outcome" in n and "--duplexact-resume" in n
               for n in partial["notes"])  # ...and says it is incomplete

    # 2. Resume: the crashed instance is retried; SIGKILL after one more outcome.
    (gate / f"hold-{ids[2]}").unlink()
    log = tmp_path / "second.log"
    proc = runs.start(log, ORACLE, f"--duplexact-resume={run_dir}",
                      DUPLEXACT_TEST_GATE=str(gate))
    wait_until(lambda: (gate / f"at-{ids[3]}").exists(), proc, log)
    assert finished(run_dir) > done
    proc.kill()
    proc.wait(timeout=30)
    assert finished(run_dir) < len(ids), "the kill did not land mid-run"
    # the earlier report stays until this session's replaces it: never no report at all
    assert read_report(run_dir) == partial
    head = log.read_text()
    assert f"duplexact: resuming {run_dir}: {done - 1} of {len(ids)} selected instance(s) " \
           "finished and reused" in head and "1 harness error(s) retried" in head, head

    # 3. Resume again, in the opposite order: the report equals the uninterrupted run's.
    res = runs.run(ORACLE, f"--duplexact-resume={run_dir}", "-p", "reverse_order")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "duplexact: resuming" in res.stdout  # shown in the terminal
    final = read_report(run_dir)
    assert_same_report(final, base)
    assert str(run_dir) not in str(final)

    # 4. Resuming a finished run reuses everything, cost totals included (journal.USAGE_KEY).
    res = runs.run(ORACLE, f"--duplexact-resume={run_dir}")
    assert f"{len(ids)} of {len(ids)} selected instance(s) finished and reused" in res.stdout
    assert_same_report(read_report(run_dir), base)


def test_sigkill_of_an_xdist_worker_then_resume_equals_an_uninterrupted_run(runs, tmp_path):
    """With the silent test model: no VAD to load, so the workers start in seconds."""
    run_dir = tmp_path / "run"
    base, status = runs.baseline(SILENT)
    log = tmp_path / "xdist.log"
    proc = runs.start(log, SILENT, "-n", "2", f"--duplexact-run-dir={run_dir}",
                      DUPLEXACT_TEST_DELAY=XDIST_DELAY)
    wait_until(lambda: finished(run_dir) >= 1 and len(child_pids(proc.pid)) == 2, proc, log)
    # The first outcome file is written just before its worker reports the test: a kill at
    # that instant lost the report but not the outcome (seen once in four runs). A moment
    # later both workers are inside their next instance's 1.5 s.
    time.sleep(0.3)
    victim = child_pids(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)
    proc.wait(timeout=120)
    out = log.read_text()
    assert "crashed" in out or "replacing" in out, out[-3000:]  # xdist saw the worker die
    n = len(selected_ids())
    assert finished(run_dir) < n, "the worker died after finishing everything"
    assert any("have no outcome" in note for note in read_report(run_dir)["notes"])

    # Resume under xdist too: the workers take the finished instances from the journal.
    res = runs.run(SILENT, "-n", "2", f"--duplexact-resume={run_dir}")
    assert res.returncode == status, res.stdout + res.stderr
    assert_same_report(read_report(run_dir), base)
