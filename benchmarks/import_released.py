"""How fast, and in how much memory, is the released data imported (released/convert.py)?

Generates, in a temporary folder, a synthetic snapshot in the dataset card's layout (8 configs,
split ``test``, ``{path, bytes}`` WAV audio at 24 kHz, empty unused audio columns, JSON
metadata) holding at least ``--gb`` GB of audio bytes, made of noise bursts
(content does not matter here; noise is the worst case for FLAC). Then runs
``duplexact import`` on it in a fresh process, which reports its own peak resident set size
(VmHWM), with wall and CPU time. The importer streams each parquet row group in small
batches, so the peak should not follow the dataset's size; ``--gb 0.05`` vs ``--gb 1`` shows
it.

    python -m benchmarks.import_released [--gb 1.0] [--rows-per-group 64] [--keep DIR]

Needs ~2.5x the audio size in free disk (snapshot + converted FLAC); deletes it afterwards
unless --keep.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from benchmarks._common import machine  # noqa: E402

RATE = 24_000
CONFIGS = {"wait": "input", "backchannel": "input", "ignore": "input", "turn_taking": "input",
           "stop": "lead_in+cue", "hold_floor": "lead_in+cue", "respond_and_recover":
           "lead_in+cue", "interrupt_user": "user_speech"}
AUDIO_COLUMNS = ("input", "lead_in", "cue", "user_speech", "branch_acknowledged",
                 "branch_ignored")
CONDITION = {"wait": "continuous_speech", "backchannel": "affirmative",
             "ignore": "background_speech", "turn_taking": "immediate",
             "stop": "direct_interruption", "hold_floor": "continue",
             "respond_and_recover": "repeat", "interrupt_user": "help"}
MAPPING = """
[annotations]
user_start = [{ key = "t.us", unit = "ms" }]
user_end = [{ key = "t.ue", unit = "ms" }]
other_start = [{ key = "t.os", unit = "ms" }]
other_end = [{ key = "t.oe", unit = "ms" }]
interrupt_target = [{ key = "t.it", unit = "ms" }]
backchannel_point = [{ key = "t.bp", unit = "ms" }]
cue_start = [{ key = "t.cs", unit = "ms" }]
cue_end = [{ key = "t.ce", unit = "ms" }]
[text]
user = ["text"]
ignored = ["text"]
cue = ["text"]
reference = ["text"]
"""


def _wav(seconds: float, rng) -> bytes:
    n = int(seconds * RATE)
    x = rng.standard_normal(n).astype(np.float32) * 0.1
    env = (np.sin(np.linspace(0, seconds * 3, n)) > -0.3).astype(np.float32)  # bursts
    pcm = np.clip(x * env * 32767, -32768, 32767).astype("<i2")
    buf = io.BytesIO()
    import soundfile as sf

    sf.write(buf, pcm, RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def generate(folder: Path, gb: float, rows_per_group: int, seed: int = 0) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    struct_t = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("condition", pa.string()), ("dataset", pa.string()),
                        ("metadata", pa.string())] + [(c, struct_t) for c in AUDIO_COLUMNS])
    per_config = gb * 1e9 / len(CONFIGS)
    total_bytes, rows_total, seconds = 0, 0, 0.0
    for cfg, layout in CONFIGS.items():
        out = folder / cfg / "test-00000-of-00001.parquet"
        out.parent.mkdir(parents=True)
        writer = pq.ParquetWriter(out, schema)
        written, row = 0, 0
        while written < per_config:
            rows = {n: [] for n in schema.names}
            for _ in range(rows_per_group):
                dur = float(rng.uniform(6.0, 14.0))
                meta = {"t": {"us": 300.0, "ue": dur * 1000 - 300, "os": 1000.0,
                              "oe": 2000.0, "it": dur * 500, "bp": dur * 500,
                              "cs": 100.0, "ce": 900.0},
                        "text": "synthetic", "scenario": "meeting"}
                rows["condition"].append(CONDITION[cfg])
                rows["dataset"].append("AMI")
                rows["metadata"].append(json.dumps(meta))
                cols = {"input": dur} if layout == "input" else {"user_speech": dur} \
                    if layout == "user_speech" else {"lead_in": dur * 0.4, "cue": 1.2}
                for c in AUDIO_COLUMNS:
                    if c in cols:
                        b = _wav(cols[c], rng)
                        written += len(b)
                        seconds += cols[c]
                        rows[c].append({"path": f"{cfg}-{row}-{c}.wav", "bytes": b})
                    else:
                        rows[c].append(None)
                row += 1
            writer.write_table(pa.table(rows, schema=schema), row_group_size=rows_per_group)
        writer.close()
        total_bytes += written
        rows_total += row
    return {"audio_bytes": total_bytes, "rows": rows_total, "audio_hours": seconds / 3600}


# The import runs in a fresh interpreter that reports its own VmHWM (the peak RSS of its
# address space since exec). ru_maxrss from wait4 is not used: on Linux it keeps the high-water
# mark of the forked copy of this (generator) process from before exec.
_CHILD = """
import sys
from pytest_duplexact.cli import main
rc = main(sys.argv[1:])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print("VmHWM_kB", hwm, file=sys.stderr)
sys.exit(rc)
"""


def run_import(snap: Path, out: Path, mapping: Path) -> dict:
    cmd = [sys.executable, "-c", _CHILD, "import", str(snap), "--out", str(out),
           "--mapping", str(mapping)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    stdout, stderr = stdout.decode(), stderr.decode()
    if proc.returncode != 0:
        raise SystemExit(f"import failed:\n{stdout}\n{stderr[-3000:]}")
    hwm = [line.split()[1] for line in stderr.splitlines() if line.startswith("VmHWM_kB")]
    return {"wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
            "peak_rss_mb": round(int(hwm[0]) / 1024, 1), "summary": stdout.strip()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--rows-per-group", type=int, default=64)
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="dx-import-bench-"))
    try:
        t0 = time.perf_counter()
        gen = generate(tmp / "snap", args.gb, args.rows_per_group)
        gen["generate_wall_s"] = round(time.perf_counter() - t0, 1)
        gen["parquet_bytes"] = sum(p.stat().st_size for p in (tmp / "snap").rglob("*.parquet"))
        (tmp / "mapping.toml").write_text(MAPPING)
        res = run_import(tmp / "snap", tmp / "out", tmp / "mapping.toml")
        res["out_bytes"] = sum(p.stat().st_size for p in (tmp / "out").rglob("*") if p.is_file())
        res["audio_x_realtime_per_cpu_s"] = round(gen["audio_hours"] * 3600 / res["cpu_s"], 1)
        res["mb_per_wall_s"] = round(gen["audio_bytes"] / 1e6 / res["wall_s"], 1)
        result = {"machine": machine(), "rows_per_group": args.rows_per_group,
                  "snapshot": gen, "import": res}
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
