"""A full-size rehearsal: the bundled set replicated to the released benchmark's 3,456
instances (benchmarks/_common.py ``replicate_dataset``), run end to end through the plugin
(``python -m pytest --duplexact-model=...``, not ``Harness.run``) with silent, oracle and
endpoint, serially and with ``-n 2``, then each oracle run re-scored from its recordings with
``recorded:DIR``. Per run: wall time, CPU time of the process tree, the peak resident memory
of the largest process in the run (the controller or a worker: ``_common.TreePeak``), the
run folder's size, and
the instances finished. Every run is a fresh process; the load average is recorded.

    python -m benchmarks.rehearsal                      # 3,456 instances: ~20 min, idle 2 cores
    python -m benchmarks.rehearsal --size 432 --out r.json   # a reduced rehearsal

Not part of benchmarks/harness_performance.py (too long); docs/benchmarks.md has what was run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT, TreePeak, load_average, machine, replicate_dataset

RELEASED_INSTANCES = 3456
MODELS = ("silent", "oracle", "endpoint")


def folder_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def plugin(model: str, dataset: Path, run_dir: Path, workers: int, extra=()) -> dict:
    """One plugin run in a fresh process: wall time, peak RSS of its largest process."""
    cmd = [sys.executable, "-m", "pytest", f"--duplexact-model={model}",
           f"--duplexact-data={dataset}", f"--duplexact-run-dir={run_dir}", "-q",
           "-p", "no:cacheprovider", "-p", "no:randomly", *extra]
    cmd += ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
    log = run_dir.with_suffix(".log")
    load0 = load_average()
    t = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=str(run_dir.parent), stdout=out,
                                stderr=subprocess.STDOUT)
    peak = TreePeak(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)  # CPU of the tree (RUSAGE_BOTH); memory: peak
    mem = peak.stop()
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: some instances failed, a valid run
        raise RuntimeError(f"{' '.join(cmd)} exited {code}; see {log}")
    finished = sum(1 for f in (run_dir / "instances").iterdir()
                   if (f / "outcome.json").is_file())
    return {"model": model, "workers": workers, "wall_s": round(wall, 1),
            "instances_finished": finished, "exit_status": code,
            "peak_rss_mb": mem["max_mb"], "processes": mem["processes"],
            "run_folder_mb": folder_mb(run_dir), "cpu_s": round(usage.ru_utime
                                                                + usage.ru_stime, 1),
            "load_average": {"before": load0, "after": load_average()}}


def main(args) -> dict:
    work = Path(args.work or tempfile.mkdtemp(prefix="duplexact-rehearsal-"))
    t = time.perf_counter()
    dataset = replicate_dataset(work / "dataset", args.size)
    report = {"benchmark": "rehearsal", "size": args.size, "machine": machine(),
              "dataset_build_s": round(time.perf_counter() - t, 1),
              "dataset_mb": folder_mb(dataset), "runs": []}
    for workers in args.workers:
        for model in args.models:
            run_dir = work / f"{model}-n{workers}"
            r = plugin(model, dataset, run_dir, workers)
            report["runs"].append(r)
            print(json.dumps(r), flush=True)
            if model == "oracle":
                again = plugin(f"recorded:{run_dir}", dataset, work / f"rescore-n{workers}",
                               workers, (f"--duplexact-cache-dir={run_dir / 'cache'}",))
                again["rescored"] = str(run_dir.name)
                report["runs"].append(again)
                print(json.dumps(again), flush=True)
    report["load_average_end"] = load_average()
    report["work_dir"] = str(work)
    return report


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=RELEASED_INSTANCES)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--work", help="work folder (default: a new temporary one)")
    ap.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks"
                    / "rehearsal.json")
    args = ap.parse_args()
    result = main(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
