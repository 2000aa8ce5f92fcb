"""Does a DuplexAct run's memory grow with its length? And how much disk does it take?

Runs ``python -m pytest --duplexact-model=MODEL --duplexact-data=DATASET`` in a fresh process
for each size (default 30 and 300 instances: the bundled set replicated with new ids, every
copy naming the same audio files) and reads the process's peak resident set size from
/proc (VmHWM of the process, ``_common.TreePeak``; ``wait4``'s figure carries the parent's
high-water mark through exec). The harness writes each recording to disk when its instance
finishes and keeps only the outcome (a small dict) in memory, so the peak should not depend
on the number of instances: the target is a difference within a few MB.

Also measures the run directory: bytes per instance folder (by file and by action), and the
run-level files.

    python -m benchmarks.memory [--model oracle] [--sizes 30 300] [--keep DIR] [--json OUT]

Serial runs only (a worker's memory is the same story in each worker). Takes a few minutes
with the oracle (it speaks, so the VAD runs on every recording); ``--model silent`` is quick
but never loads the VAD.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from benchmarks._common import plugin_run
from pytest_duplexact.data.instance import HEADER, MANIFEST, bundled_root


def replicate(dst: Path, size: int) -> Path:
    """``size`` instances: the bundled manifest over and over, ids suffixed ``-r<copy>``, all
    pointing at the bundled audio (linked, not copied)."""
    src = bundled_root()
    lines = [json.loads(s) for s in (src / MANIFEST).read_text(encoding="utf-8").splitlines()
             if s.strip()]
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "audio").symlink_to(src / "audio", target_is_directory=True)
    header = json.loads((src / HEADER).read_text(encoding="utf-8"))
    header["name"] = f"{header.get('name', 'bundled')}-x{size}"
    (dst / HEADER).write_text(json.dumps(header) + "\n", encoding="utf-8")
    out = []
    for k in range(size):
        copy, i = divmod(k, len(lines))
        obj = dict(lines[i], id=f"{lines[i]['id']}-r{copy:02d}")
        out.append(json.dumps(obj, ensure_ascii=False))
    (dst / MANIFEST).write_text("\n".join(out) + "\n", encoding="utf-8")
    return dst


def disk_usage(run_dir: Path) -> dict:
    """Bytes per instance folder (mean by action and per file name) and the run-level files."""
    per_action: dict[str, list[int]] = defaultdict(list)
    per_file: dict[str, list[int]] = defaultdict(list)
    for folder in sorted((run_dir / "instances").iterdir()):
        outcome = json.loads((folder / "outcome.json").read_text(encoding="utf-8"))
        sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
        per_action[outcome["action"]].append(sum(sizes.values()))
        for name, n in sizes.items():
            per_file[name].append(n)
    every = [n for v in per_action.values() for n in v]
    kb = lambda v: round(statistics.mean(v) / 1024, 1)  # noqa: E731
    return {
        "instances": len(every),
        "mean_kb_per_instance": kb(every),
        "max_kb_per_instance": round(max(every) / 1024, 1),
        "by_action_mean_kb": {a: kb(v) for a, v in sorted(per_action.items())},
        "by_file_mean_kb": {f: kb(v) for f, v in sorted(per_file.items())},
        "run_files_kb": {p.name: round(p.stat().st_size / 1024, 1)
                         for p in sorted(run_dir.iterdir()) if p.is_file()},
        "total_mb": round(sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
                          / 2**20, 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="oracle", help="a stepped model (default: oracle)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[30, 300])
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="duplexact-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    dataset = replicate(work / "dataset", max(args.sizes))
    result = {"model": args.model, "load_average": [round(v, 2) for v in os.getloadavg()],
              "runs": {}}
    for n in args.sizes:
        # n instances spread evenly over the replicated set, so every size has the same mix
        # of actions (the peak follows the longest recording, not only the count)
        sub = work / f"dataset-{n}"
        if not sub.exists():
            sub.mkdir()
            (sub / "audio").symlink_to(dataset / "audio", target_is_directory=True)
            (sub / HEADER).write_text((dataset / HEADER).read_text(), encoding="utf-8")
            lines = (dataset / MANIFEST).read_text(encoding="utf-8").splitlines()
            pick = lines[:: max(1, len(lines) // n)][:n]
            (sub / MANIFEST).write_text("\n".join(pick) + "\n", encoding="utf-8")
        run_dir = work / f"run-{n}"
        result["runs"][n] = plugin_run(args.model, sub, run_dir, work / f"run-{n}.log")
        print(f"{n:>5} instances: peak RSS {result['runs'][n]['peak_rss_mb']} MB "
              f"({result['runs'][n]['wall_s']} s)", flush=True)
    small, big = min(args.sizes), max(args.sizes)
    result["growth_mb"] = round(result["runs"][big]["peak_rss_mb"]
                                - result["runs"][small]["peak_rss_mb"], 1)
    result["disk"] = disk_usage(work / f"run-{big}")
    print(f"peak RSS growth from {small} to {big} instances: {result['growth_mb']} MB")
    d = result["disk"]
    print(f"run directory: {d['mean_kb_per_instance']} KB per instance on average "
          f"(max {d['max_kb_per_instance']} KB), {d['total_mb']} MB for {d['instances']}")
    print("  by action:", ", ".join(f"{a} {v} KB" for a, v in d["by_action_mean_kb"].items()))
    print("  by file:  ", ", ".join(f"{f} {v} KB" for f, v in d["by_file_mean_kb"].items()))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
