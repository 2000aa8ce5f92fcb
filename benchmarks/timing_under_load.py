"""Does the timing guard hold on a busy machine?

Runs trials of the real gpt-realtime adapter (openai SDK client) against the fake realtime
server (tests/fakes/realtime_server.py, its own process on 127.0.0.1) the way the plugin does:
on the prefetcher's background loop (run/prefetch.py, admission control and the lowered
limit of a re-run included), each through the harness's timing guard (``Harness._on_time``:
a trial over the tolerance stops, is re-run, then is timing unreliable), while this process's
main thread scores every finished recording as a pytest process does while others stream:
``Harness.analyse`` writes its FLAC tracks and segments it with the real VAD, by default in
the scoring worker process as the plugin does (run/offload.py; ``--scoring in-process``: in
this thread, the worker's baseline; ``--scoring none``: not at all). For each machine
state (N CPU-bound processes beside it) and concurrency:

* onset error of the *scored* trials: the recorded response onset (energy threshold on the
  output track) against the instant the server actually sent its first audio delta (both
  clocks time.monotonic()), |error| p50 / p95 / max in ms;
* trials re-run, trials reported unreliable, and **mis-timed**: scored trials whose true
  onset error exceeds ``--mistimed-ms`` (default 100, the default tolerance: with the guard
  on, its promise is zero; ``--tolerance-ms 0`` turns the guard off to compare);
* wall time, the CPU the streaming loop's thread spent per second of streamed audio per
  session (what ``--duplexact-estimate``'s sessions per core is computed from), and the CPU
  and the wall time the main thread spent scoring (``Harness.analyse``), per trial.

    python -m benchmarks.timing_under_load [--hogs 0 2] [--concurrency 8 16 32]
                                           [--instances 32] [--tolerance-ms 100]
                                           [--scoring worker|in-process|none]

Prints a table and writes JSON (``--out``). Sends nothing beyond 127.0.0.1; a dummy key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from benchmarks import realtime_concurrency as rc  # noqa: E402
from benchmarks._common import machine  # noqa: E402
from pytest_duplexact.data.audio import SAMPLE_RATE  # noqa: E402
from pytest_duplexact.models.providers.gpt_realtime import factory  # noqa: E402
from pytest_duplexact.pipelines.clock import TimingUnreliable  # noqa: E402
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex  # noqa: E402
from pytest_duplexact.run.harness import Harness  # noqa: E402
from pytest_duplexact.run.offload import ScoringWorker  # noqa: E402
from pytest_duplexact.run.prefetch import Prefetcher  # noqa: E402
from tests.support.servers import load_fake_server  # noqa: E402

fake = load_fake_server("realtime_server")


def _hog() -> None:  # a CPU-bound process beside the harness
    while True:
        pass


@dataclass
class Trial:
    """One instance: each attempt is its own server session, tagged ``<id>-a<k>``."""

    id: str
    attempts: list


def _stats(values_ms: list[float]) -> dict:
    if not values_ms:
        return {"p50": None, "p95": None, "max": None, "n": 0}
    a = np.abs(np.array(values_ms))
    return {"p50": round(float(np.percentile(a, 50)), 1),
            "p95": round(float(np.percentile(a, 95)), 1),
            "max": round(float(a.max()), 1), "n": int(len(a))}


def one_level(base_url: str, n: int, concurrency: int, x: np.ndarray, script: dict,
              tolerance: float | None, scoring: str, run_dir: Path,
              worker: ScoringWorker | None) -> dict:
    seen: dict[str, dict] = {}  # attempt tag -> t0, onset

    def trial_of(trial: Trial):
        async def attempt():
            tag = f"{trial.id}-a{len(trial.attempts)}"
            trial.attempts.append(tag)
            model = factory(base_url=base_url, silence_duration_ms="200",
                            instructions="SCRIPT " + json.dumps({**script, "tag": tag}))
            d = await StreamingDuplex.open(model, None)
            seen[tag] = {"t0": None, "onset": None}
            try:
                await d.push(x)
            except BaseException:  # a stopped attempt (TrialLate): release its session
                seen[tag]["t0"] = d.started_at
                try:
                    await d.close()
                except Exception:  # the first error is the one that counts
                    pass
                raise
            seen[tag]["t0"] = d.started_at
            rec = await d.close()
            bounds = fake.energy_bounds(rec.output, SAMPLE_RATE)
            seen[tag]["onset"] = None if bounds is None else bounds[0]
            return rec
        return attempt

    # the plugin's harness as Harness.from_settings makes it for streaming trials in flight
    harness = Harness(model=None, run_dir=run_dir, timing_tolerance=tolerance,
                      scoring_worker=worker if scoring == "worker" else None)
    pre = Prefetcher(lambda t: harness._on_time(trial_of(t)), concurrency, timeout=60.0,
                     tolerance=tolerance)
    harness.prefetcher = pre
    cpu: Future = asyncio.run_coroutine_threadsafe(_thread_cpu(), pre._loop)
    cpu0 = cpu.result()
    trials = [Trial(f"c{concurrency}-{i}", []) for i in range(n)]
    start = time.perf_counter()
    pre.submit(trials)
    outcomes, score_cpu, score_wall = {}, 0.0, 0.0
    for t in trials:  # in order, as pytest takes them, scoring each in this thread
        try:
            rec = pre.result(t)
        except TimingUnreliable as e:
            outcomes[t.id] = ("unreliable", e.clock)
            continue
        except Exception as e:  # counted, not raised
            outcomes[t.id] = ("error", repr(e))
            continue
        if scoring != "none":  # files + VAD: in the worker, or here (--scoring in-process)
            c0, w0 = time.thread_time(), time.perf_counter()
            harness.analyse(rec, run_dir / t.id, t.id)
            score_cpu += time.thread_time() - c0
            score_wall += time.perf_counter() - w0
        outcomes[t.id] = ("scored", rec.clock)
    wall = time.perf_counter() - start
    cpu1 = asyncio.run_coroutine_threadsafe(_thread_cpu(), pre._loop).result()
    pre.close()
    streamed = sum(len(t.attempts) for t in trials) * len(x) / SAMPLE_RATE
    return {"concurrency": concurrency, "instances": n, "stream_s": len(x) / SAMPLE_RATE,
            "wall_s": round(wall, 2), "trials": trials, "outcomes": outcomes, "seen": seen,
            "loop_cpu_ms_per_stream_s": round((cpu1 - cpu0) * 1000 / max(streamed, 1e-9), 2),
            "main_score_cpu_ms_per_trial": round(score_cpu * 1000 / n, 2),
            "score_wall_ms_per_trial": round(score_wall * 1000 / n, 2)}


async def _thread_cpu() -> float:
    return time.thread_time()


def score_level(lv: dict, sent: dict[str, float], bound: float) -> None:
    errors, mistimed = [], 0
    for t in lv.pop("trials"):
        kind, _ = lv["outcomes"][t.id]
        if kind != "scored":
            continue
        final = t.attempts[-1]
        run = lv["seen"].get(final, {})
        if final in sent and run.get("t0") is not None and run.get("onset") is not None:
            err = run["onset"] - (sent[final] - run["t0"])
            errors.append(err * 1000)
            if abs(err) > bound:
                mistimed += 1
    outcomes = lv.pop("outcomes")
    lv.pop("seen")
    lv["onset_error_ms"] = _stats(errors)
    lv["scored"] = sum(k == "scored" for k, _ in outcomes.values())
    lv["rerun"] = sum(bool(c.get("reruns")) for k, c in outcomes.values()
                      if k in ("scored", "unreliable"))
    lv["unreliable"] = sum(k == "unreliable" for k, _ in outcomes.values())
    lv["errors"] = sum(k == "error" for k, _ in outcomes.values())
    lv["mistimed"] = mistimed
    lv["worst_lag_ms"] = max([max(c.get("input_lag_max_ms", 0), c.get("output_lag_max_ms", 0),
                                  c.get("loop_stall_max_ms", 0))
                              for k, c in outcomes.values() if k != "error"], default=None)


def one_state(hogs: int, args, script: dict, x: np.ndarray, tolerance: float | None,
              work: Path, worker: ScoringWorker | None) -> dict:
    """Every concurrency, with ``hogs`` CPU-bound processes beside this one."""
    procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for p in procs:
        p.start()
    server = rc.ServerProcess(script, args.out.with_suffix(f".server{hogs}.json"))
    levels = []
    try:
        time.sleep(1.0 if hogs else 0.0)  # let the hogs take their cores
        load_before = round(os.getloadavg()[0], 2)
        # warm-up: imports, the SDK client, the scoring worker and its VAD; not measured
        one_level(server.base_url, 1, 1, x, script, None, args.scoring, work, worker)
        for c in args.concurrency:
            levels.append(one_level(server.base_url, args.instances, c, x, script,
                                    tolerance, args.scoring, work, worker))
        load_after = round(os.getloadavg()[0], 2)
    finally:
        sessions = server.stop()
        for p in procs:
            p.terminate()
            p.join(5)
    sent = {s["tag"]: s["t0_monotonic"] + s["responses"][0]["audio_start"]
            for s in sessions if s.get("tag") and s.get("responses")
            and s["responses"][0].get("audio_start") is not None
            and s.get("t0_monotonic") is not None}
    for lv in levels:
        score_level(lv, sent, args.mistimed_ms / 1000)
    return {"hogs": hogs, "load_1m_before": load_before, "load_1m_after": load_after,
            "levels": levels}


def main(args) -> dict:
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"  # never a real key against a fake
    script = {"answer_after_ms": args.answer_ms, "speak_s": args.speak_s, "pace": 4.0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tolerance = None if args.tolerance_ms <= 0 else args.tolerance_ms / 1000
    speech_end = 0.8
    x = rc.clip(speech_end, speech_end + args.answer_ms / 1000 + args.speak_s + 0.3)
    states = []
    work = Path(tempfile.mkdtemp(prefix="duplexact-timing-"))
    worker = ScoringWorker(nice=args.worker_nice) if args.scoring == "worker" else None
    try:
        for hogs in args.hogs:
            states.append(one_state(hogs, args, script, x, tolerance, work, worker))
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(work, ignore_errors=True)  # the trials' files: not what is measured
    return {"benchmark": "timing_under_load", "machine": machine(),
            "tolerance_ms": args.tolerance_ms if tolerance else None,
            "mistimed_ms": args.mistimed_ms,
            "scoring": args.scoring, "worker_nice": args.worker_nice if args.scoring == "worker"
            else None, "answer_after_ms": args.answer_ms,
            "speak_s": args.speak_s, "states": states}


def table(report: dict) -> str:
    rows = ["hogs  load 1m   conc  inst  wall_s  |onset err| ms p50/p95/max  scored  re-run  "
            "unreliable  mis-timed  worst lag ms  loop CPU ms/stream s  "
            "scoring CPU / wall ms/trial"]
    for st in report["states"]:
        for lv in st["levels"]:
            e = lv["onset_error_ms"]
            rows.append(f"{st['hogs']:>4}  {st['load_1m_before']:>4}-{st['load_1m_after']:<4}"
                        f" {lv['concurrency']:>4}  {lv['instances']:>4}  {lv['wall_s']:>6.1f}  "
                        f"{e['p50']!s:>6} / {e['p95']!s:>6} / {e['max']!s:>6}     "
                        f"{lv['scored']:>6}  {lv['rerun']:>6}  {lv['unreliable']:>10}  "
                        f"{lv['mistimed']:>9}  {lv['worst_lag_ms']!s:>12}  "
                        f"{lv['loop_cpu_ms_per_stream_s']:>8}  "
                        f"{lv['main_score_cpu_ms_per_trial']:>8} / "
                        f"{lv['score_wall_ms_per_trial']:>8}")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0, 2],
                        help="CPU-bound processes beside the harness, one state each")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--instances", type=int, default=32)
    parser.add_argument("--tolerance-ms", type=float, default=100.0, help="0: guard off")
    parser.add_argument("--mistimed-ms", type=float, default=100.0,
                        help="a scored trial whose true onset error exceeds this is mis-timed")
    parser.add_argument("--answer-ms", type=float, default=400.0)
    parser.add_argument("--speak-s", type=float, default=0.8)
    parser.add_argument("--scoring", choices=("worker", "in-process", "none"),
                        default="worker",
                        help="where finished trials are written and segmented: the plugin's "
                             "scoring worker (default), this process's main thread, or not")
    parser.add_argument("--worker-nice", type=int, default=ScoringWorker().nice,
                        help="the scoring worker's added niceness (the plugin's by default)")
    parser.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks"
                        / "timing_under_load.json")
    args = parser.parse_args()
    report = main(args)
    print(table(report))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
