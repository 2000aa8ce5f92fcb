"""The bridge route's cost and timing on loopback (docs/bridge-protocol.md, docs/benchmarks.md).

1. Stepped round trip: one 80 ms frame at 24 kHz (1920 float32 samples) through
   ``--duplexact-model=bridge`` to the scripted bridge (tests/fakes/bridge_server.py: the real
   kit, its own process, a model that costs microseconds) and back: median and p99 of the
   wall time per ``step``, against the same model's ``step`` called in process, and as a share
   of an 80 ms step (a GPU model stepping at 80 ms must not be slowed by more than 3 %).
2. Onset error against the scripted truth: the model's speech starts at a known instant
   (``speak_at_s``, off the frame grid); the heard output's first loud sample through the
   bridge minus the same model's in process (so the detector's own bias cancels), stepped
   (lockstep: exact) and streaming (wall clock: one frame late by construction, plus the
   loop).

    python -m benchmarks.bridge_overhead [--steps 2000] [--trials 4] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import machine, stats_ms
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import SessionInfo
from tests.bridges.support import scripted_server
from tests.support.servers import load_fake_server

FRAME_S = 0.08


def round_trips(steps: int) -> dict:
    """Wall time per step through the bridge vs the same model in process."""
    fake = _fake()
    frame = np.zeros(1920, np.float32)
    local = fake.SpeaksAt(24_000, 1920, 1.0)
    local.start(SessionInfo(instance=None))
    t_local = []
    for _ in range(steps):
        t0 = time.perf_counter()
        local.step(frame)
        t_local.append(time.perf_counter() - t0)
    with scripted_server({"model": "at"}, "--log-level", "warning") as url:
        model = resolve_model("bridge", url=url)
        model.start(SessionInfo(instance=None))
        for _ in range(50):  # warm up: first connection, allocator, caches
            model.step(frame)
        t_bridge = []
        for _ in range(steps):
            t0 = time.perf_counter()
            model.step(frame)
            t_bridge.append(time.perf_counter() - t0)
        model.finish()
    b, loc = np.array(t_bridge) * 1000, np.array(t_local) * 1000
    over_median = float(np.median(b) - np.median(loc))
    return {"steps": steps,
            "bridge_ms": {"median": round(float(np.median(b)), 3),
                          "p99": round(float(np.percentile(b, 99)), 3)},
            "in_process_ms": {"median": round(float(np.median(loc)), 4),
                              "p99": round(float(np.percentile(loc, 99)), 4)},
            "overhead_median_ms": round(over_median, 3),
            "overhead_of_80ms_step_pct": round(100 * over_median / (FRAME_S * 1000), 2),
            "p99_of_80ms_step_pct": round(100 * float(np.percentile(b, 99)) / 80, 2)}


def _fake():
    return load_fake_server("bridge_server")


def onset(output: np.ndarray, threshold: float = 0.01) -> float:
    loud = np.flatnonzero(np.abs(output) > threshold)
    return loud[0] / SAMPLE_RATE if len(loud) else float("nan")


def onsets(mode: str, trials: int) -> dict:
    """Heard onset minus the scripted speech onset, per trial (direct replay of silence)."""
    import tempfile

    from pytest_duplexact.data import audio
    from pytest_duplexact.data.annotations import Annotations, Clip, Instance
    from pytest_duplexact.pipelines.direct import DirectReplay
    from pytest_duplexact.pipelines.stepped import SteppedDuplex
    from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex

    tmp = Path(tempfile.mkdtemp())
    audio.write(tmp / "user.flac", np.zeros(SAMPLE_RATE // 2, np.float32))
    instance = Instance("bench", "take_turn", "immediate", "casual", "synthesized",
                        Annotations(user_start=0.0), {"user": Clip(tmp / "user.flac", 0.5)}, {})
    errors = []
    for k in range(trials):
        at = 0.5 + 0.137 * k  # not on a frame boundary, so the step cannot hide an error
        info = SessionInfo(instance)
        replay = DirectReplay(observation_s=at + 0.5)
        # the truth: the same scripted model in process, heard through the same detector
        truth = asyncio.run(replay.run(SteppedDuplex(_fake().SpeaksAt(24_000, 1920, at), info),
                                       instance))
        with scripted_server({"model": "at", "mode": mode, "speak_at_s": at},
                            "--log-level", "warning") as url:
            model = resolve_model("bridge", url=url)

            async def go():
                duplex = SteppedDuplex(model, info) if mode == "stepped" else \
                    await StreamingDuplex.open(model, info)
                return await replay.run(duplex, instance)

            rec = asyncio.run(go())
        errors.append(onset(rec.output) - onset(truth.output))
    return stats_ms(errors)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--out")
    args = p.parse_args()
    res = {"machine": machine(), "round_trip": round_trips(args.steps),
           "onset_error_stepped": onsets("stepped", args.trials),
           "onset_error_streaming": onsets("streaming", args.trials)}
    rt = res["round_trip"]
    print(f"stepped round trip, 1920 samples @ 24 kHz, {rt['steps']} steps on loopback:")
    print(f"  through the bridge   median {rt['bridge_ms']['median']:.3f} ms   "
          f"p99 {rt['bridge_ms']['p99']:.3f} ms")
    print(f"  the model in process median {rt['in_process_ms']['median']:.4f} ms")
    print(f"  overhead             {rt['overhead_median_ms']:.3f} ms = "
          f"{rt['overhead_of_80ms_step_pct']:.2f} % of an 80 ms step (target <= 3 %); "
          f"p99 {rt['p99_of_80ms_step_pct']:.2f} %")
    for mode in ("stepped", "streaming"):
        s = res[f"onset_error_{mode}"]
        print(f"onset error, {mode:9s}: {json.dumps(s)}")
    print(f"machine: {json.dumps(res['machine'])}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
