"""How much disk a run takes: the oracle over the bundled set through the plugin, once with
FLAC recordings (the default) and once with ``--duplexact-audio-format=wav``; mean size per
instance folder and per file, and the projected size of a run of the released benchmark
(3,456 instances) at the bundled set's mix of actions and trial lengths. A part of
benchmarks/harness_performance.py (``size``); alone:

    python -m benchmarks.run_size
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from benchmarks._common import plugin_run
from benchmarks.memory import disk_usage
from pytest_duplexact.data.instance import bundled_root

RELEASED_INSTANCES = 3456


def measure(work: Path, model: str = "oracle") -> dict:
    out = {"model": model, "dataset": "bundled", "released_instances": RELEASED_INSTANCES,
           "formats": {}}
    for fmt in ("flac", "wav"):
        run_dir = work / f"size-{fmt}"
        run = plugin_run(model, bundled_root(), run_dir, work / f"size-{fmt}.log",
                         (f"--duplexact-audio-format={fmt}",))
        du = disk_usage(run_dir)
        per = du["mean_kb_per_instance"]
        out["formats"][fmt] = {**du, "wall_s": run["wall_s"],
                               "projected_released_run_gb": round(per * RELEASED_INSTANCES
                                                                  / 2**20, 2)}
    f, w = out["formats"]["flac"], out["formats"]["wav"]
    out["flac_over_wav"] = round(f["mean_kb_per_instance"] / w["mean_kb_per_instance"], 3)
    return out


def lines(r: dict) -> list[str]:
    out = [f"\nrun folder size ({r['model']}, bundled set through the plugin; projected to "
           f"{r['released_instances']} instances)"]
    for fmt, d in r["formats"].items():
        files = ", ".join(f"{k} {v}" for k, v in d["by_file_mean_kb"].items())
        out.append(f"  {fmt:<5} {d['mean_kb_per_instance']:>7.1f} KB per instance (max "
                   f"{d['max_kb_per_instance']}; {files} KB) -> "
                   f"{d['projected_released_run_gb']} GB for the released set")
    out.append(f"  flac / wav: {r['flac_over_wav']}")
    return out


if __name__ == "__main__":
    result = measure(Path(tempfile.mkdtemp(prefix="duplexact-size-")))
    print("\n".join(lines(result)))
    print(json.dumps(result, indent=1))
