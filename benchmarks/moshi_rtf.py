"""Real-time factor of the moshi adapter's pieces on one CPU core, with random weights.

Times the adapter's frame loop (``models/moshi.py``: Mimi encode, ``LMGen.step``, Mimi decode)
per 80 ms frame, one torch thread, on 10 s of noise, for:

- ``mimi-tiny``: the tests' tiny Mimi (tests/models/providers/moshi_tiny.py), encode + decode only;
- ``mimi-full``: the released Mimi architecture (loaders.get_mimi(None): random weights, the
  same compute), encode + decode only;
- ``tiny``: the tests' whole tiny model through ``MoshiModel.step`` (what the tests run).

The full 7B LM is not timed: on one CPU core it is far from real time, and its weights are not
here. Figures: CPU seconds (and wall seconds) per second of audio; below 1.0 is faster than
real time. Each is the median of three passes after one warm-up pass.

    python -m benchmarks.moshi_rtf [--seconds 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._common import ROOT, Clock, machine

FRAME = 1920


def mimi_loop(mimi, x: np.ndarray) -> None:
    import torch

    with torch.no_grad(), mimi.streaming(1):
        for k in range(len(x) // FRAME):
            codes = mimi.encode(torch.from_numpy(x[k * FRAME:(k + 1) * FRAME])[None, None])
            mimi.decode(codes)


def model_loop(model, x: np.ndarray) -> None:
    from pytest_duplexact.models.contract import SessionInfo

    model.start(SessionInfo(instance=None))
    for k in range(len(x) // FRAME):
        model.step(x[k * FRAME:(k + 1) * FRAME])
    model.finish()


def measure(run, x: np.ndarray, passes: int = 3) -> dict:
    run(x)  # warm-up: first calls allocate the streaming state and caches
    clocks = []
    for _ in range(passes):
        with Clock() as c:
            run(x)
        clocks.append(c)
    seconds = len(x) / 24_000
    return {"rtf_cpu": round(statistics.median(c.cpu for c in clocks) / seconds, 3),
            "rtf_wall": round(statistics.median(c.wall for c in clocks) / seconds, 3),
            "passes_cpu_s": [round(c.cpu, 3) for c in clocks]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path, default=ROOT / "duplexact-runs/benchmarks/moshi.json")
    args = ap.parse_args()

    import torch
    from moshi.models import loaders

    from pytest_duplexact.models import resolve_model
    from tests.models.providers.moshi_tiny import fit_codebooks, mimi_config, write_checkpoints

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = (0.1 * np.random.default_rng(0).standard_normal(int(args.seconds * 24_000))
         ).astype(np.float32)
    results = {"machine": machine(), "seconds": args.seconds, "threads": 1}
    tiny = loaders.get_mimi(None, mimi_config(), num_codebooks=8)
    with torch.no_grad():
        fit_codebooks(tiny)
    results["mimi-tiny"] = measure(lambda a: mimi_loop(tiny, a), x)
    full = loaders.get_mimi(None, num_codebooks=8)
    results["mimi-full"] = measure(lambda a: mimi_loop(full, a), x)
    with tempfile.TemporaryDirectory() as tmp:
        options = write_checkpoints(Path(tmp))
        model = resolve_model("moshi", **options, device="cpu", threads="1")
        results["tiny"] = measure(lambda a: model_loop(model, a), x)
    results["machine"]["load_average_after"] = machine()["load_average"]

    print(f"{'what':<10} {'RTF (CPU)':>10} {'RTF (wall)':>11}")
    for key in ("mimi-tiny", "mimi-full", "tiny"):
        r = results[key]
        print(f"{key:<10} {r['rtf_cpu']:>10.3f} {r['rtf_wall']:>11.3f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
