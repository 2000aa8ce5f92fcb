"""The Slurm recipe of docs/sharding.md on a real Slurm (.ci/slurm-up: one node, 4 task
slots): the array script and the merge job exactly as the docs print them, submitted with
sbatch, against the unsharded serial run of the same model.

One scenario carries every check, so the scheduler's waits (a time limit is checked every
30 s) overlap instead of adding up: two arrays at once into one shared store, one of them
with each of its tasks stopped a different way (kill -9, scancel, requeue, time limit),
resumed and merged; the other clean, with its merge submitted up front.

Skipped where sbatch is absent or no controller answers (the reason says how to bring one
up); .ci/run starts Slurm first and sets DUPLEXACT_REQUIRE_SLURM=1, so in CI a missing
cluster fails instead of skipping. Every wait on the scheduler has a deadline."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.report.store.merge import PROVENANCE_KEYS
from tests.cluster.gated_oracle import HOLD_AT

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes"
ARRAY, MERGE = RECIPES / "slurm-array.sbatch", RECIPES / "slurm-merge.sbatch"
MODEL = "tests.cluster.gated_oracle:GatedOracle"  # the oracle, with a gate a test can close
TASKS = 4
# One instance per condition (24: shards of 6, 3, 7 and 8): a task's cost is its interpreter
# and imports (~4 s of CPU), not its instances, and every held task has more than one.
SELECTION = "--duplexact-limit=1"
JOB_DEADLINE_S = 420.0  # for any one wait on the scheduler (a loaded 2-core CI machine)
# The troubled array's tasks, each stopped its own way while held at its gate. The time
# limit goes to task 0, the first to start: Slurm's one-minute limit (checked every 30 s)
# is the scenario's longest wait, and everything else runs while it passes.
TIME_LIMIT, SCANCEL, REQUEUE, KILL9 = range(TASKS)
STORED = re.compile(r"^duplexact: stored this run as (.+)$", re.M)  # store.save, announced


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
        never = [j for j in jobs if states[j] == "PENDING"
                 and "DependencyNeverSatisfied" in _scontrol("show", "job", j)]
        if never:  # Slurm's last word on them: fail now, not at the deadline
            pytest.fail(f"jobs {never} will never run (DependencyNeverSatisfied)")
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


def _task_ids(array: str) -> list[str]:
    return [f"{array}_{t}" for t in range(TASKS)]


def _outcomes(run_dir: Path) -> int:
    return len(list((run_dir / "instances").glob("*/outcome.json")))


def test_the_recipe_is_the_one_the_docs_print():
    doc = (ROOT / "docs" / "sharding.md").read_text(encoding="utf-8")
    for script in (ARRAY, MERGE):
        assert script.read_text(encoding="utf-8") in doc, f"docs/sharding.md lacks {script}"
    assert f"--array=0-{TASKS - 1}" in ARRAY.read_text()


def test_two_arrays_one_stopped_every_way_resume_merge_to_the_serial_run_and_keep_every_save(
        slurm, tmp_path):
    """Two arrays at once, every task saving its report into one shared store
    (--duplexact-autosave). Array B runs the recipe untouched, its merge submitted up front
    with ``afterok:$array``. Array A has each task stopped mid-run (held at its gate, its
    ``HOLD_AT``-th trial) a way a cluster ends a task, then re-queued:

    - task 0 runs past its time limit (TIMEOUT: SIGTERM, report written, the log names the
      resume command);
    - task 1 by ``scancel --signal=KILL`` (Slurm cancels: SIGTERM, SIGKILL after KillWait);
    - task 2 by ``scontrol requeue`` while it runs (what preemption does);
    - task 3 by ``kill -9`` of its pytest (the OOM killer, a crash: no clean-up at all).

    Each resumes its folder and re-runs only what had no outcome. Both merges equal the
    serial run (a subprocess of this test, run while the arrays are), and the store holds
    every save any task announced, each numbered once and whole."""
    store, gate = tmp_path / "store", tmp_path / "gate"
    gate.mkdir()
    for t in range(TASKS):
        (gate / f"hold-{t}").touch()
    autosave = f"--duplexact-autosave --duplexact-storage={store}"
    runs = {"a": tmp_path / "a", "b": tmp_path / "b"}
    # A: the held trial waits for this test, not for the model watchdog's 60 s default; one
    # CPU per task, so that its held (idle) tasks leave the node's 4 slots to B's tasks
    env_a = _env(runs["a"], DUPLEXACT_GATE=str(gate),
                 DUPLEXACT_ARGS=f"--duplexact-timeout=900 {autosave}")
    env_b = _env(runs["b"], DUPLEXACT_ARGS=autosave)
    jobs, serial_dir = [], tmp_path / "serial"

    def submit(env: dict, *args: str) -> str:
        jobs.append(_sbatch(tmp_path, env, *args))
        return jobs[-1]

    serial_dir.mkdir()
    serial = None
    try:
        array_a = submit(env_a, "--cpus-per-task=1", str(ARRAY))
        up_front_a = submit(env_a, f"--dependency=afterok:{array_a}", str(MERGE))
        array_b = submit(env_b, str(ARRAY))
        merge_b = submit(env_b, f"--dependency=afterok:{array_b}", str(MERGE))
        with open(serial_dir / "pytest.log", "w") as serial_log:
            serial = subprocess.Popen(  # the unsharded run, what every merge must equal
                [sys.executable, "-m", "pytest", f"--duplexact-model={MODEL}",
                 f"--duplexact-run-dir={serial_dir / 'run'}", SELECTION,
                 "-p", "no:cacheprovider", "-q"],
                cwd=serial_dir, env=_env(serial_dir), stdout=serial_log,
                stderr=subprocess.STDOUT)
        done_before = _stop_each_way(array_a, runs["a"], gate, tmp_path)
        states = _ended(_task_ids(array_a) + _task_ids(array_b) + [merge_b], tmp_path)
        assert set(states.values()) == {"COMPLETED"}, states
        # Three of A's tasks ended failed (CANCELLED, FAILED, TIMEOUT) before their re-queue,
        # and Slurm never re-evaluates afterok on the array after a failure: its up-front
        # merge stays pending, and a merge that depends on the tasks by name runs instead
        # (docs/sharding.md says both). Submitted once they have completed: submitted right
        # after the re-queues, it was once refused too (a task still read as failed).
        merge_a = submit(env_a, "--dependency=afterok:" + ":".join(_task_ids(array_a)),
                         str(MERGE))
        assert _ended([merge_a], tmp_path) == {merge_a: "COMPLETED"}
        # by now the scheduler has long judged it: a deadline, not a delay
        _wait(lambda: "DependencyNeverSatisfied" in _scontrol("show", "job", up_front_a),
              "A's up-front merge to be refused", tmp_path, deadline_s=120)
        rc = serial.wait(timeout=JOB_DEADLINE_S)
    finally:  # nothing of this test stays queued or running, whatever failed
        if serial is not None and serial.poll() is None:
            serial.kill()
        if jobs:
            subprocess.run(["scancel", *jobs], capture_output=True, timeout=60)
    assert rc == 0, (serial_dir / "pytest.log").read_text()[-3000:]

    for t, n in done_before.items():  # each stopped mid-run, then resumed its own folder
        assert n == HOLD_AT - 1, done_before
        log = (tmp_path / f"duplexact-{array_a}_{t}.log").read_text()
        shard = runs["a"] / f"shard-{t}"
        assert f"attempt 2, --duplexact-resume={shard}" in log, log[-2000:]
        assert f"resuming {shard}: {n} of " in log and "finished and reused" in log, log[-2000:]
    assert "stopped by SIGTERM" in (tmp_path / f"duplexact-{array_a}_{TIME_LIMIT}.log"
                                    ).read_text()

    serial_report = _comparable(serial_dir / "run" / "report.json")
    for name, where in runs.items():
        assert len(list(where.glob("shard-*/report.json"))) == TASKS, name
        assert _comparable(where / "report.json") == serial_report, name
        shards = json.loads((where / "report.json").read_text())["shards"]
        assert all(s["instances"] for s in shards)  # really split, none empty
        assert (where / "report.html").stat().st_size > 0

    # The shared store lost no save: every one a task announced is there, numbered once and
    # whole, and nothing else is. Each attempt that wrote its report saved it (a kill -9
    # saves nothing): every task's last attempt at least.
    announced = {t: STORED.findall(p.read_text())
                 for t in _task_ids(array_a) + _task_ids(array_b)
                 for p in [tmp_path / f"duplexact-{t}.log"]}
    assert all(announced.values()), announced
    assert len(announced[f"{array_a}_{KILL9}"]) == 1, announced
    saved = sorted(store.glob("*.json"))
    assert sorted(p for paths in announced.values() for p in paths) == \
        [str(p) for p in saved], [p.name for p in saved]
    numbers = [p.name.split("_", 1)[0] for p in saved]
    assert len(set(numbers)) == len(numbers)  # every save numbered once
    for p in saved:
        assert json.loads(p.read_text())["summary"]  # each a whole report


def _stop_each_way(array: str, runs: Path, gate: Path, logs: Path) -> dict[int, int]:
    """Stops each task of ``array`` its own way as soon as it is held at its gate, then
    opens its gate and sends it back to the queue; returns each task's outcomes when it was
    stopped. The time limit is the last to end: its SIGTERM comes 60-90 s after the task
    started, and the others are stopped and resumed meanwhile."""
    task = {t: f"{array}_{t}" for t in range(TASKS)}
    stop = {SCANCEL: lambda pid: subprocess.run(["scancel", "--signal=KILL", task[SCANCEL]],
                                                check=True, timeout=60),
            REQUEUE: lambda pid: _scontrol("requeue", task[REQUEUE]),
            KILL9: lambda pid: os.kill(pid, signal.SIGKILL),
            # a limit on the running task: held, it cannot end before the limit does
            TIME_LIMIT: lambda pid: _scontrol("update", f"jobid={task[TIME_LIMIT]}",
                                              "TimeLimit=1")}
    stopped = {SCANCEL: ("CANCELLED",), REQUEUE: ("PENDING", "REQUEUED"), KILL9: ("FAILED",),
               TIME_LIMIT: ("TIMEOUT",)}

    def resume(t: int) -> None:
        _wait(lambda: _state(task[t]) in stopped[t], f"task {t} to stop", logs)
        if t != KILL9:  # a TERM first: the gate stays closed until pytest has said how to
            # resume (its report written), so the abandoned trial cannot go on meanwhile
            said = f"resume with pytest --duplexact-resume={runs / f'shard-{t}'}"
            _wait(lambda: said in (logs / f"duplexact-{task[t]}.log").read_text(),
                  f"task {t} to say how to resume", logs)
        (gate / f"hold-{t}").unlink()

        def requeued() -> bool:
            """Back in the queue. A requeue sent while the task is still completing can be
            accepted and not take (seen: a kill -9'd task stayed FAILED), so it is sent
            again until the task has left its failed state."""
            if _state(task[t]) not in ("CANCELLED", "FAILED", "TIMEOUT"):
                return True
            subprocess.run(["scontrol", "requeue", task[t]], capture_output=True, timeout=60)
            return False

        if t != REQUEUE:  # Slurm re-queued that one itself
            _wait(requeued, f"task {t} to be re-queued", logs)
        # a re-queued job waits ~2 min before it is eligible again: not here; the timed-out
        # one gets a limit it can finish in (docs/sharding.md). A killed task is let start
        # only a few seconds on: relaunched 0.7 s after its kill, slurmd refused it ("Job 56
        # already killed, do not launch batch job", exit 1 at once, in a clean-clone CI run)
        start = "now+5" if t in (KILL9, SCANCEL) else "now"
        _scontrol("update", f"jobid={task[t]}", f"StartTime={start}",
                  *(["TimeLimit=30"] if t == TIME_LIMIT else []))

    done_before, pending = {}, set(range(TASKS))
    while pending:  # the tasks reach their gates in any order
        held = _wait(lambda: [p for t in pending for p in gate.glob(f"held-{t}-*")],
                     f"tasks {sorted(pending)} to reach their gates", logs)
        for p in held:
            t, pid = (int(x) for x in p.name.split("-")[1:])
            done_before[t] = _outcomes(runs / f"shard-{t}")
            stop[t](pid)
            pending.discard(t)
            if t != TIME_LIMIT:
                resume(t)
    # the TIMEOUT's log and report are whole once squeue no longer lists the task
    _wait(lambda: _state(task[TIME_LIMIT]) == "TIMEOUT", "the time limit", logs)
    _ended([task[TIME_LIMIT]], logs)
    assert (runs / f"shard-{TIME_LIMIT}" / "report.json").exists()  # what it measured
    resume(TIME_LIMIT)
    return done_before
