"""How many gpt-realtime sessions can run at once without bending the timeline?

Runs N instances through the real gpt-realtime adapter (openai SDK websocket client) against
the fake realtime server (tests/fakes/realtime_server.py, in its own process on 127.0.0.1) at
several concurrency levels, and reports

* wall time over ideal, ideal = stream time x ceil(N / concurrency): a streaming model can
  never be faster than real time, so this is the harness's overhead under load;
* onset error: the recorded response onset (energy threshold on the output track) minus the
  truth, the scripted one (the server answers ``answer_after_ms`` after the user's speech
  ends) and the instant the server actually sent its first audio delta (both clocks are
  time.monotonic(), so this isolates the harness from a fake server that falls behind);
* the largest lag of an input chunk behind its wall-clock slot.

    python -m benchmarks.realtime_concurrency [--instances 32] [--concurrency 1 4 16 32]

Prints a table and writes JSON (``--out``). Sends nothing beyond 127.0.0.1; uses a dummy key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


from pytest_duplexact.data.audio import SAMPLE_RATE  # noqa: E402
from pytest_duplexact.models.contract import ModelError  # noqa: E402
from pytest_duplexact.models.providers.gpt_realtime import factory  # noqa: E402
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex  # noqa: E402
from pytest_duplexact.remote.retry import RetryPolicy  # noqa: E402
from tests.support.realtime import run_concurrently  # noqa: E402
from tests.support.servers import ChildFailed, child, load_fake_server  # noqa: E402

fake = load_fake_server("realtime_server")


class ServerProcess:
    """The fake server in its own process, so its work does not share our event loop."""

    def __init__(self, script: dict, log: Path):
        self.log = log
        self.child = child("realtime_server.py", "--script", json.dumps(script), "--log", log)
        self.base_url = f"http://127.0.0.1:{self.child.port}/v1"

    def stop(self) -> list[dict]:
        """Stop the server; its log of every session's ground truth."""
        try:
            self.child.stop()
        except ChildFailed:  # it did not stop and was killed: no log
            return []
        return json.loads(self.log.read_text())


def clip(speech_end: float, total: float) -> np.ndarray:
    x = np.zeros(int(round(total * SAMPLE_RATE)), np.float32)
    a, b = int(0.2 * SAMPLE_RATE), int(round(speech_end * SAMPLE_RATE))
    x[a:b] = 0.3 * np.sin(2 * np.pi * 300 * np.arange(b - a) / SAMPLE_RATE)
    return x


def _stats_ms(values: list[float]) -> dict:
    err = np.abs(np.array(values, dtype=float)) * 1000
    if not len(err) or np.isnan(err).all():
        return {"median": None, "p95": None, "max": None, "n": 0}
    return {"median": round(float(np.nanmedian(err)), 1),
            "p95": round(float(np.nanpercentile(err, 95)), 1),
            "max": round(float(np.nanmax(err)), 1), "n": int((~np.isnan(err)).sum())}


async def one_level(base_url: str, n: int, concurrency: int, x: np.ndarray,
                    onset_truth: float, script: dict, chunk_ms: float) -> dict:
    runs: dict[str, dict] = {}

    def job(tag: str):
        model = factory(base_url=base_url, silence_duration_ms="200", chunk_ms=chunk_ms,
                        instructions="SCRIPT " + json.dumps({**script, "tag": tag}))

        async def run():
            d = await StreamingDuplex.open(model, None)
            try:
                await d.push(x)
            finally:
                runs[tag] = {"t0": d.started_at, "lag": d.max_input_lag}
            rec = await d.close()
            bounds = fake.energy_bounds(rec.output, SAMPLE_RATE)
            runs[tag]["onset"] = None if bounds is None else bounds[0]
            return rec
        return run

    tags = [f"c{concurrency}-{i}" for i in range(n)]
    start = time.perf_counter()
    results = await run_concurrently([job(t) for t in tags], concurrency,
                                     RetryPolicy(max_attempts=2, backoff_base=0.1, jitter=True))
    wall = time.perf_counter() - start
    stream_s = len(x) / SAMPLE_RATE
    ideal = stream_s * math.ceil(n / concurrency)
    return {
        "concurrency": concurrency, "instances": n, "stream_s": stream_s,
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "ratio": round(wall / ideal, 3),
        "onset_truth_s": onset_truth, "runs": runs,
        "max_input_lag_ms": round(max(r["lag"] for r in runs.values()) * 1000, 1),
        "errors": [str(e) for e in results if isinstance(e, ModelError)],
    }


def score(levels: list[dict], sessions: list[dict]) -> None:
    """Onset errors against the scripted truth and against the server's actual send time."""
    sent = {}
    for s in sessions:
        if s["tag"] and s["responses"] and s["responses"][0]["audio_start"] is not None:
            sent[s["tag"]] = s["t0_monotonic"] + s["responses"][0]["audio_start"]
    for lv in levels:
        vs_script, vs_sent = [], []
        for tag, run in lv.pop("runs").items():
            onset = np.nan if run.get("onset") is None else run["onset"]
            vs_script.append(onset - lv["onset_truth_s"])
            if tag in sent and run["t0"] is not None:
                vs_sent.append(onset - (sent[tag] - run["t0"]))
        lv["onset_error_vs_script_ms"] = _stats_ms(vs_script)
        lv["onset_error_vs_server_send_ms"] = _stats_ms(vs_sent)
        lv["missing_onsets"] = int(np.isnan(vs_script).sum())


async def main(args) -> dict:
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"  # never a real key against a fake
    script = {"answer_after_ms": args.answer_ms, "speak_s": args.speak_s, "pace": 4.0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    server = ServerProcess(script, args.out.with_suffix(".server.json"))
    speech_end = 0.8
    x = clip(speech_end, speech_end + args.answer_ms / 1000 + args.speak_s + 0.3)
    levels = []
    try:
        # warm-up (imports, the shared SDK client and first connections), not measured
        truth = speech_end + args.answer_ms / 1000
        await one_level(server.base_url, 1, 1, x, truth, script, args.chunk_ms)
        for c in args.concurrency:
            levels.append(await one_level(server.base_url, args.instances, c, x, truth,
                                          script, args.chunk_ms))
    finally:
        sessions = server.stop()
    score(levels, sessions)
    return {"benchmark": "realtime_concurrency", "python": platform.python_version(),
            "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
            "answer_after_ms": args.answer_ms, "speak_s": args.speak_s, "chunk_ms": args.chunk_ms,
            "levels": levels}


def table(report: dict) -> str:
    rows = ["concurrency  instances  stream_s  wall_s  ideal_s  ratio   "
            "|onset err| ms median/p95/max   (vs server send)    input lag ms  errors"]
    for lv in report["levels"]:
        a, b = lv["onset_error_vs_script_ms"], lv["onset_error_vs_server_send_ms"]
        rows.append(f"{lv['concurrency']:>11}  {lv['instances']:>9}  {lv['stream_s']:>8.2f}  "
                    f"{lv['wall_s']:>6.2f}  {lv['ideal_s']:>7.2f}  {lv['ratio']:>5.2f}   "
                    f"{a['median']:>6} / {a['p95']:>5} / {a['max']:>5}   "
                    f"({b['median']} / {b['p95']} / {b['max']})   "
                    f"{lv['max_input_lag_ms']:>8.1f}  {len(lv['errors'])}")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--answer-ms", type=float, default=400.0)
    parser.add_argument("--speak-s", type=float, default=0.8)
    parser.add_argument("--chunk-ms", type=float, default=20.0, help="input chunk size")
    parser.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks"
                        / "realtime_concurrency.json")
    args = parser.parse_args()
    report = asyncio.run(main(args))
    print(table(report))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
