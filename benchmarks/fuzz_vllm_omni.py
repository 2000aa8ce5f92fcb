"""A longer fuzz campaign of the vllm-omni adapter's event stream
(tests/models/test_fuzz_vllm_omni.py): runs the hypothesis properties with ``DUPLEXACT_FUZZ_EXAMPLES`` examples each (fresh random seeds) in
a child pytest, then prints, per property, the examples hypothesis ran and the outcome, and
the child's peak RSS (no hostile input may take it past 500 MB).

    python -m benchmarks.fuzz_vllm_omni --examples 2000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/models/test_fuzz_vllm_omni.py"]
LIMIT_MB = 500


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=2000)
    p.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks" /
                   "fuzz_vllm_omni.json")
    args = p.parse_args()
    env = {**os.environ, "DUPLEXACT_FUZZ_EXAMPLES": str(args.examples)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "pytest", *TESTS, "-q", "-p", "no:cacheprovider",
                          "--hypothesis-show-statistics", "-k", "each_event or sessions_against"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out = res.stdout + res.stderr
    rows = []
    for block in re.split(r"\n(?=tests/\S+::)", out):
        name = re.match(r"(tests/\S+::\S+):", block)
        counts = re.search(r"- (\d+) passing examples?, (\d+) failing examples?, (\d+) invalid",
                           block)
        if name and counts:
            rows.append({"property": name.group(1).split("::")[-1],
                         "passing": int(counts.group(1)), "failing": int(counts.group(2)),
                         "invalid": int(counts.group(3))})
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    print(f"{'property':<80} {'passing':>8} {'failing':>8} {'invalid':>8}")
    for r in rows:
        print(f"{r['property']:<80} {r['passing']:>8} {r['failing']:>8} {r['invalid']:>8}")
    print(f"pytest: {summary}; wall {wall:.0f} s; peak RSS of the child {peak_mb:.0f} MB "
          f"(limit {LIMIT_MB} MB)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"examples": args.examples, "properties": rows,
                                    "pytest": summary, "wall_s": round(wall, 1),
                                    "peak_rss_mb": round(peak_mb, 1),
                                    "load": os.getloadavg()}, indent=2))
    if res.returncode != 0:
        print(out[-4000:])
    return 0 if res.returncode == 0 and peak_mb <= LIMIT_MB else 1


if __name__ == "__main__":
    sys.exit(main())
