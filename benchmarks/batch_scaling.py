"""Batched stepping (``--duplexact-batch=B``, docs/runs.md): what B buys, on this machine.

1. ``moshi``: the tests' tiny random Moshi (tests/models/providers/moshi_tiny.py) on CPU through the real
   pipelines (``Harness.record``: Direct, Simulator and barge-in on bundled instances, the
   lockstep of run/batch.py for B > 1, the plain stepped session for B = 1) at B = 1, 2, 4, 8,
   16: trials per second, x real time (trial audio seconds per wall second), the ratio to
   B = 1, and where the time goes (the share spent inside the model's calls).
2. ``harness``: the harness's own cost per trial-step at B = 16 with a model that costs
   nothing (the silent model with an 80 ms frame, Moshi's), against an 80 ms GPU step: per
   lockstep tick (16 trial-steps), the time outside the model's call.
3. ``rehearsal``: the plugin end to end (pytest, VAD, scoring, the run folder) on the bundled
   set replicated to ``--size`` instances (the released set is 3,456), with the built-ins at
   B = 16 against B = 1, serially; the two reports are compared (they must be identical).

Timings are wall and CPU seconds of this process; the machine is usually shared, so the load
average is recorded with each part.

    python -m benchmarks.batch_scaling                       # all three parts
    python -m benchmarks.batch_scaling --parts moshi harness --sizes 1 2 4 8
    python -m benchmarks.batch_scaling --parts rehearsal --size 432
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT, Clock, load_average, machine, replicate_dataset
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.rules import requires
from pytest_duplexact.run.harness import Harness, RunKnobs
from pytest_duplexact.run.settings import RunSettings


class ModelClock:
    """Time spent inside the model's calls: ``step`` at B = 1, ``step_batch`` above (patched on
    the instance; never both, as the built-ins' step_batch calls step on per-slot copies)."""

    def __init__(self, model, batch: int):
        self.seconds, self.calls = 0.0, 0
        for name in ("step",) if batch == 1 else ("step_batch",):
            inner = getattr(model, name)

            def timed(*a, _inner=inner):
                t = time.perf_counter()
                try:
                    return _inner(*a)
                finally:
                    self.seconds += time.perf_counter() - t
                    self.calls += 1

            setattr(model, name, timed)


def pick(n: int) -> list:
    """``n`` bundled instances, the pipelines interleaved (every third is a simulator or
    barge-in trial), the same for every B."""
    by_pipe: dict[str, list] = {}
    for inst in sorted(load_dataset(bundled_root(), requires=requires).instances,
                       key=lambda i: i.id):
        by_pipe.setdefault(inst.pipeline.value, []).append(inst)
    order = [p for p in ("direct", "simulator", "barge_in") if p in by_pipe]
    out = []
    while len(out) < n:
        out.append(by_pipe[order[len(out) % len(order)]][len(out) // len(order)
                                                         % len(by_pipe[order[len(out)
                                                                             % len(order)]])])
    return out


def record_all(model, name: str, batch: int, insts, work: Path) -> dict:
    """Record every instance as the plugin would (submit the next 2B, then wait for each)."""
    h = Harness.from_settings(RunSettings(model=name), work / f"{name}-b{batch}",
                              RunKnobs(batch=batch, timeout=600), model=model)
    clock = ModelClock(model, batch)
    seconds, load0 = 0.0, load_average()
    try:
        with Clock() as c:
            for k, inst in enumerate(insts):
                if h.prefetcher is not None:
                    h.prefetcher.submit(insts[k: k + 1 + 2 * batch])
                seconds += h.record(inst).duration
    finally:
        if h.prefetcher is not None:
            h.prefetcher.close()
        for attr in ("step", "step_batch"):
            model.__dict__.pop(attr, None)
    return {"B": batch, "trials": len(insts), "audio_s": round(seconds, 1),
            "wall_s": round(c.wall, 2), "cpu_s": round(c.cpu, 2),
            "trials_per_s": round(len(insts) / c.wall, 3),
            "x_real_time": round(seconds / c.wall, 2),
            # CPU figures: what the work costs this process, mostly immune to other load
            "trials_per_cpu_s": round(len(insts) / c.cpu, 3),
            "x_real_time_cpu": round(seconds / c.cpu, 2),
            "model_share": round(clock.seconds / c.wall, 3),
            "model_calls": clock.calls,
            "ms_per_model_call": round(1000 * clock.seconds / max(clock.calls, 1), 2),
            "load_average": {"before": load0, "after": load_average()}}


def warm(model, batch: int) -> None:
    """The first calls at a new batch shape cost seconds (torch's first passes)."""
    import numpy as np

    from pytest_duplexact.models.contract import SessionInfo

    x = np.zeros(model.frame_size, dtype=np.float32)
    if batch == 1:
        model.start(SessionInfo(instance=None))
        for _ in range(3):
            model.step(x)
        model.finish()
        return
    model.open_batch(batch)
    for s in range(batch):
        model.start_slot(s, SessionInfo(instance=None))
    for _ in range(3):
        model.step_batch({s: x for s in range(batch)})


def part_moshi(args, work: Path) -> dict:
    from pytest_duplexact.models import resolve_model
    from tests.models.providers.moshi_tiny import write_checkpoints

    files = write_checkpoints(work / "moshi-tiny")
    model = resolve_model("moshi", **files, device="cpu", threads=str(args.threads))
    rows = []
    for b in args.sizes:
        warm(model, b)
        row = record_all(model, "moshi", b, pick(max(args.trials, 2 * b)), work)
        rows.append(row)
        print(json.dumps(row), flush=True)
    base = next((r for r in rows if r["B"] == 1), None)
    for r in rows:
        if base is not None:
            r["ratio_to_B1"] = round(r["trials_per_s"] / base["trials_per_s"], 2)
            r["ratio_to_B1_cpu"] = round(r["trials_per_cpu_s"] / base["trials_per_cpu_s"], 2)
    return {"threads": args.threads, "rows": rows}


def part_harness(args, work: Path) -> dict:
    from pytest_duplexact.models.providers.silent import SilentModel

    class Silent80(SilentModel):
        frame_size = 1280  # 80 ms at 16 kHz: Moshi's step

    b = 16
    model = Silent80()
    insts = pick(2 * b)
    clock = ModelClock(model, b)
    h = Harness.from_settings(RunSettings(model="silent"), work / "silent-b16",
                              RunKnobs(batch=b, timeout=600), model=model)
    frames = 0
    try:
        with Clock() as c:
            for k, inst in enumerate(insts):
                h.prefetcher.submit(insts[k: k + 1 + 2 * b])
                frames += -(-len(h.record(inst).input) // model.frame_size)
    finally:
        h.prefetcher.close()
    ticks = h.prefetcher.batcher.progress.beats
    own = c.wall - clock.seconds
    per_tick_ms = 1000 * own / ticks
    return {"B": b, "trials": len(insts), "trial_steps": frames, "ticks": ticks,
            "wall_s": round(c.wall, 2), "model_s": round(clock.seconds, 2),
            "harness_us_per_trial_step": round(1e6 * own / frames, 1),
            "harness_ms_per_tick": round(per_tick_ms, 3),
            "share_of_80ms_step": round(per_tick_ms / 80.0, 4),
            "load_average": load_average()}


def part_rehearsal(args, work: Path) -> dict:
    from benchmarks.rehearsal import plugin
    from tests.support.runs import comparable

    dataset = replicate_dataset(work / "dataset", args.size)
    rows = []
    for model in args.models:
        pair = {}
        for b in (1, 16):
            run_dir = work / f"rehearsal-{model}-b{b}"
            r = plugin(model, dataset, run_dir, 1, (f"--duplexact-batch={b}",))
            r["B"] = b
            pair[b] = run_dir
            rows.append(r)
            print(json.dumps(r), flush=True)
        same = [comparable(json.loads((pair[b] / "report.json").read_text()))
                for b in (1, 16)]
        rows[-1]["report_identical_to_B1"] = same[0] == same[1]
        rows[-1]["wall_ratio_B16_to_B1"] = round(rows[-1]["wall_s"] / rows[-2]["wall_s"], 3)
    return {"size": args.size, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", nargs="+", default=["moshi", "harness", "rehearsal"],
                    choices=["moshi", "harness", "rehearsal"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--trials", type=int, default=4, help="moshi: trials per B (at least 2B)")
    ap.add_argument("--threads", type=int, default=1, help="moshi: torch threads")
    ap.add_argument("--size", type=int, default=3456, help="rehearsal: instances")
    ap.add_argument("--models", nargs="+", default=["silent", "oracle", "endpoint"])
    ap.add_argument("--json", type=Path,
                    default=ROOT / "duplexact-runs" / "benchmarks" / "batch_scaling.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="duplexact-batch-"))
    result = {"benchmark": "batch_scaling", "machine": machine()}
    for part in args.parts:
        result[part] = {"moshi": part_moshi, "harness": part_harness,
                        "rehearsal": part_rehearsal}[part](args, work)
    if "moshi" in result:
        print("\nB   trials/s  x real time  ratio to B=1  (by CPU time)  model share  "
              "ms per model call")
        for r in result["moshi"]["rows"]:
            print(f"{r['B']:<3} {r['trials_per_s']:<9} {r['x_real_time']:<12} "
                  f"{r.get('ratio_to_B1', '-'):<13} {r.get('ratio_to_B1_cpu', '-'):<14} "
                  f"{r['model_share']:<12} {r['ms_per_model_call']}")
    if "harness" in result:
        h = result["harness"]
        print(f"\nharness at B=16: {h['harness_us_per_trial_step']} us per trial-step, "
              f"{h['harness_ms_per_tick']} ms per tick = {100 * h['share_of_80ms_step']:.2f} % "
              "of an 80 ms step")
    if "rehearsal" in result:
        print(f"\nrehearsal, {result['rehearsal']['size']} instances, serial:")
        for r in result["rehearsal"]["rows"]:
            print(f"  {r['model']:<9} B={r['B']:<3} {r['wall_s']} s"
                  + (f"  (B16/B1 {r['wall_ratio_B16_to_B1']}, identical report: "
                     f"{r['report_identical_to_B1']})" if "wall_ratio_B16_to_B1" in r else ""))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
