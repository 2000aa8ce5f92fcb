"""The Slurm recipe of docs/sharding.md on a real Slurm (.ci/slurm-up: one node, 4 task
slots): the array script and the merge job exactly as the docs print them, submitted with
sbatch, against the unsharded serial run of the same model.

Skipped where sbatch is absent or no controller answers (the reason says how to bring one
up); .ci/run starts Slurm first and sets DUPLEXACT_REQUIRE_SLURM=1, so in CI a missing
cluster fails instead of skipping. Every wait on the scheduler has a deadline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.report.merge import PROVENANCE_KEYS
from tests.cluster.gated_oracle import HOLD_AT

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes"
ARRAY, MERGE = RECIPES / "slurm-array.sbatch", RECIPES / "slurm-merge.sbatch"
MODEL = "tests.cluster.gated_oracle:GatedOracle"  # the oracle, with a gate a test can close
TASKS = 4
# One instance per condition (24: shards of 6, 3, 7 and 8): each task stays short, and every
# task a test holds at its 2nd trial has more than one.
SELECTION = "--duplexact-limit=1"
JOB_DEADLINE_S = 420.0  # for any one wait on the scheduler (a loaded 2-core CI machine)


def _cluster_reason() -> str | None:
    if shutil.which("sbatch") is None:
        return "sbatch is absent: .ci/slurm-up brings up a single-node Slurm (Debian's slurm-wlm)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                             timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sinfo did not answer ({e}): is slurmctld running? .ci/slurm-up starts it"
    if out.returncode != 0 or not any(s.startswith(("idle", "mix", "alloc"))
                                      for s in out.stdout.split()):
        return (f"no Slurm node takes work (sinfo: {(out.stdout + out.stderr).strip()!r}): "
                ".ci/slurm-up starts one")
    return None


@pytest.fixture(scope="module")
def slurm():
    reason = _cluster_reason()
    if reason:
        if os.environ.get("DUPLEXACT_REQUIRE_SLURM"):
            pytest.fail(f"DUPLEXACT_REQUIRE_SLURM is set but {reason}")
        pytest.skip(reason)


def _env(runs: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # the job runs `python` and `duplexact` from PATH: this interpreter's, with this checkout
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    extra["DUPLEXACT_ARGS"] = " ".join([SELECTION, extra.get("DUPLEXACT_ARGS", "")]).strip()
    env.update(DUPLEXACT_RUNS=str(runs), DUPLEXACT_MODEL=MODEL, **extra)
    for k in [k for k in env if k.startswith(("SLURM_", "PYTEST_XDIST", "PYTEST_CURRENT"))]:
        del env[k]  # never hand a task our own (xdist worker) identity
    return env


def _sbatch(cwd: Path, env: dict, *args: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def _scontrol(*args: str) -> str:
    out = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _state(job: str) -> str:
    """JobState of a job or array task (the record is kept MinJobAge=300 s after it ends)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True,
                         text=True, timeout=60).stdout
    states = {f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")}
    return ",".join(sorted(states)) or "UNKNOWN"


def _wait(predicate, what: str, logs: Path, deadline_s: float = JOB_DEADLINE_S):
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        got = predicate()
        if got:
            return got
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                      for p in sorted(logs.glob("*.log")))
    pytest.fail(f"waited {deadline_s:.0f} s for {what}\n{tails}")


def _ended(jobs: list[str], logs: Path) -> dict[str, str]:
    final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
             "PREEMPTED")

    def done():
        states = {j: _state(j) for j in jobs}
        if not all(s in final for s in states.values()):
            return None
        # a job's final state is set before its processes have exited (COMPLETING): its
        # log is whole only once squeue no longer lists it
        listed = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(jobs)],
                                capture_output=True, text=True, timeout=60).stdout.split()
        return None if listed else states
    return _wait(done, f"jobs {jobs} to end", logs)


def _comparable(path: Path) -> str:
    rep = json.loads(path.read_text(encoding="utf-8"))
    return json.dumps({k: v for k, v in rep.items() if k not in VOLATILE_KEYS + PROVENANCE_KEYS},
                      indent=1, sort_keys=True)


@pytest.fixture(scope="module")
def serial(slurm, tmp_path_factory) -> Path:
    """The unsharded run of the same model in one process: what every merge must equal."""
    where = tmp_path_factory.mktemp("serial")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", f"--duplexact-model={MODEL}",
         f"--duplexact-run-dir={where / 'run'}", SELECTION, "-p", "no:cacheprovider", "-q"],
        cwd=where, env=_env(where), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return where / "run" / "report.json"


def _task_ids(array: str) -> list[str]:
    return [f"{array}_{t}" for t in range(TASKS)]


def _shards(runs: Path) -> list[Path]:
    return sorted(runs.glob("shard-*/report.json"))


def test_the_recipe_is_the_one_the_docs_print():
    doc = (ROOT / "docs" / "sharding.md").read_text(encoding="utf-8")
    for script in (ARRAY, MERGE):
        assert script.read_text(encoding="utf-8") in doc, f"docs/sharding.md lacks {script}"
    assert f"--array=0-{TASKS - 1}" in ARRAY.read_text()


def test_two_arrays_at_once_merge_to_the_serial_run_and_store_every_report(slurm, serial,
                                                                          tmp_path):
    """Two arrays submitted together, each with its merge as a dependent job, every task
    saving its report into one shared store (--duplexact-autosave) as they finish."""
    store = tmp_path / "store"
    jobs = {}
    for name in ("a", "b"):
        env = _env(tmp_path / name, DUPLEXACT_ARGS=f"--duplexact-autosave "
                   f"--duplexact-storage={store}")
        array = _sbatch(tmp_path, env, str(ARRAY))
        jobs[name] = (array, _sbatch(tmp_path, env, f"--dependency=afterok:{array}",
                                     str(MERGE)))
    states = _ended([j for array, merge in jobs.values() for j in _task_ids(array) + [merge]],
                    tmp_path)
    assert set(states.values()) == {"COMPLETED"}, states
    for name in jobs:
        runs = tmp_path / name
        assert len(_shards(runs)) == TASKS
        assert _comparable(runs / "report.json") == _comparable(serial)
        shards = json.loads((runs / "report.json").read_text())["shards"]
        assert all(s["instances"] for s in shards)  # really split, none empty
        assert (runs / "report.html").stat().st_size > 0
    saved = sorted(store.glob("*.json"))
    assert len(saved) == 2 * TASKS, [p.name for p in saved]
    numbers = [p.name.split("_", 1)[0] for p in saved]
    assert len(set(numbers)) == len(numbers)  # every save numbered once
    for p in saved:
        assert json.loads(p.read_text())["summary"]  # each a whole report


def test_killed_and_requeued_tasks_resume_and_the_merge_is_unchanged(slurm, serial, tmp_path):
    """Three tasks stopped mid-run, each a way a cluster ends a task, then re-queued: task 1
    by ``scancel --signal=KILL`` (Slurm cancels: SIGTERM, SIGKILL after KillWait), task 2 by
    ``scontrol requeue`` while it runs (what preemption does), task 3 by ``kill -9`` of its
    pytest (the OOM killer, a crash: no clean-up at all). Each resumes its folder and re-runs
    only what had no outcome; the merge equals the serial run."""
    gate, runs = tmp_path / "gate", tmp_path / "runs"
    gate.mkdir()
    stopped = (1, 2, 3)
    for t in stopped:
        (gate / f"hold-{t}").touch()
    # the held trial waits for the test, not for the model watchdog's 60 s default
    env = _env(runs, DUPLEXACT_GATE=str(gate), DUPLEXACT_ARGS="--duplexact-timeout=900")
    array = _sbatch(tmp_path, env, str(ARRAY))
    merge = _sbatch(tmp_path, env, f"--dependency=afterok:{array}", str(MERGE))
    stop = {1: lambda pid: subprocess.run(["scancel", "--signal=KILL", f"{array}_1"],
                                          check=True, timeout=60),
            2: lambda pid: _scontrol("requeue", f"{array}_2"),
            3: lambda pid: os.kill(pid, signal.SIGKILL)}
    done_before = {}
    for t in stopped:  # each as soon as it is held: the tasks get their slots in turn
        held = _wait(lambda t=t: list(gate.glob(f"held-{t}-*")), f"task {t} to reach its gate",
                     tmp_path)[0]
        done_before[t] = _outcomes(runs / f"shard-{t}")
        stop[t](int(held.name.rsplit("-", 1)[1]))
        _wait(lambda t=t: _state(f"{array}_{t}") in ("CANCELLED", "FAILED", "PENDING"),
              f"task {t} to stop", tmp_path)
    assert all(n == HOLD_AT - 1 for n in done_before.values()), done_before  # mid-run
    for t in stopped:
        (gate / f"hold-{t}").unlink()
    for t in (1, 3):
        _scontrol("requeue", f"{array}_{t}")
    for t in stopped:  # a re-queued job waits ~2 min before it is eligible again: not here
        _scontrol("update", f"jobid={array}_{t}", "StartTime=now")
    states = _ended(_task_ids(array), tmp_path)
    assert set(states.values()) == {"COMPLETED"}, states

    for t in stopped:
        log = (tmp_path / f"duplexact-{array}_{t}.log").read_text()
        assert "attempt 2, --duplexact-resume=" in log, log[-2000:]
        assert f"{done_before[t]} of " in log and "finished and reused" in log, log[-2000:]
    for t in (1, 2):  # a TERM first: the run stopped cleanly and said how to resume
        log = (tmp_path / f"duplexact-{array}_{t}.log").read_text()
        assert f"resume with pytest --duplexact-resume={runs / f'shard-{t}'}" in log
    # Tasks 1 and 3 ended failed before their re-queue, and Slurm never re-evaluates afterok
    # on the array after a failure, not even for a merge submitted anew: the one submitted up
    # front stays pending, and the merge depends on the tasks by name instead
    # (docs/sharding.md says both).
    _wait(lambda: "DependencyNeverSatisfied" in _scontrol("show", "job", merge),
          "the up-front merge to be refused", tmp_path, deadline_s=120)
    subprocess.run(["scancel", merge], check=True, timeout=60)
    merge = _sbatch(tmp_path, env, "--dependency=afterok:" + ":".join(_task_ids(array)),
                    str(MERGE))
    assert _ended([merge], tmp_path) == {merge: "COMPLETED"}
    assert _comparable(runs / "report.json") == _comparable(serial)


def _outcomes(run_dir: Path) -> int:
    return len(list((run_dir / "instances").glob("*/outcome.json")))


def test_a_task_at_its_time_limit_ends_resumable_and_names_the_resume(slurm, serial,
                                                                        tmp_path):
    gate, runs = tmp_path / "gate", tmp_path / "runs"
    gate.mkdir()
    (gate / "hold-3").touch()  # task 3 waits at its gate past its 1-minute limit
    env = _env(runs, DUPLEXACT_GATE=str(gate), DUPLEXACT_ARGS="--duplexact-timeout=900")
    array = _sbatch(tmp_path, env, "--time=1", str(ARRAY))
    states = _ended(_task_ids(array), tmp_path)
    assert states.pop(f"{array}_3") == "TIMEOUT"
    assert set(states.values()) == {"COMPLETED"}, states
    shard = runs / "shard-3"
    log = (tmp_path / f"duplexact-{array}_3.log").read_text()
    assert "stopped by SIGTERM" in log and f"resume with pytest --duplexact-resume={shard}" \
        in log, log[-2000:]
    assert (shard / "report.json").exists()  # what it measured is reported
    (gate / "hold-3").unlink()
    _scontrol("requeue", f"{array}_3")
    _scontrol("update", f"jobid={array}_3", "StartTime=now")
    assert _ended([f"{array}_3"], tmp_path) == {f"{array}_3": "COMPLETED"}
    merge = _sbatch(tmp_path, env, "--dependency=afterok:" + ":".join(_task_ids(array)),
                    str(MERGE))
    assert _ended([merge], tmp_path) == {merge: "COMPLETED"}
    assert _comparable(runs / "report.json") == _comparable(serial)
