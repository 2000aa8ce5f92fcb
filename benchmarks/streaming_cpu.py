"""Our CPU per streamed audio second per session, per streaming adapter, against its fake.

Each adapter's fake server (tests/fakes/) runs in a child process of its own (this module
with ``--serve``), so its work neither shares our event loop nor counts as ours: the child
reports its own ``time.process_time()`` when asked. In this process, N sessions at
concurrency C each stream the same clip through the adapter and ``StreamingDuplex`` exactly
as Direct Replay does (40 ms pushes on the wall clock), the fake answering each turn; our
``time.process_time()`` over the level, divided by the audio seconds streamed (sessions x
clip length), is the figure: CPU milliseconds per streamed audio second per session.

    python -m benchmarks.streaming_cpu [--adapters gpt-realtime ...] [--sessions 48]
                                       [--concurrency 32] [--clip-s 4] [--out FILE]

Prints one table and writes JSON. Sends nothing beyond 127.0.0.1 (a dummy key).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import numpy as np

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.base import ModelError
from pytest_duplexact.pipelines.direct import push_in_chunks
from pytest_duplexact.pipelines.streaming import StreamingDuplex, run_with_retry
from pytest_duplexact.remote.retry import RetryPolicy

ROOT = Path(__file__).resolve().parents[1]
SPEECH_END_S = 1.0  # the clip's tone ("speech") ends here; the fake answers after it


# --- the fakes, each served from a child process ---------------------------------------------

@contextlib.asynccontextmanager
async def _realtime_server() -> AsyncIterator[str]:
    from tests.fakes import realtime_server as fake

    script = fake.Script(answer_after_ms=300.0, speak_s=1.0, pace=4.0)
    async with fake.FakeRealtimeServer(script) as server:
        yield server.base_url


@dataclass(frozen=True)
class Adapter:
    """How to serve an adapter's fake (in the child) and build the model (here)."""

    serve: Callable[[], Any]          # an async context manager yielding the URL
    build: Callable[[str], Any]       # URL -> model
    max_concurrency: int | None = None


def _gpt_realtime(url: str):
    from pytest_duplexact.models.openai_realtime import factory

    return factory(base_url=url, silence_duration_ms="200")


ADAPTERS: dict[str, Adapter] = {
    "gpt-realtime": Adapter(_realtime_server, _gpt_realtime),
}


def _serve(name: str) -> None:
    """The child: serve ``name``'s fake, print ``PORT``-style ``URL <url>``, answer ``cpu``
    with this process's CPU seconds, stop when stdin closes."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with ADAPTERS[name].serve() as url:
            print(f"URL {url}", flush=True)
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    return
                print(f"CPU {time.process_time():.6f}", flush=True)

    asyncio.run(main())


class Child:
    """A fake in its own process (this module with ``--serve``); ``cpu()`` its CPU so far."""

    def __init__(self, name: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.streaming_cpu",
                                      "--serve", name], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("URL "):
            self.stop()
            raise RuntimeError(f"the {name} fake did not start: {line!r}")
        self.url = line.split(None, 1)[1].strip()

    def cpu(self) -> float:
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline().split()[1])

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


# --- one level ------------------------------------------------------------------------------

def clip(total_s: float) -> np.ndarray:
    x = np.zeros(int(round(total_s * SAMPLE_RATE)), np.float32)
    a, b = int(0.2 * SAMPLE_RATE), int(SPEECH_END_S * SAMPLE_RATE)
    x[a:b] = 0.3 * np.sin(2 * np.pi * 300 * np.arange(b - a) / SAMPLE_RATE)
    return x


async def _session(model, x: np.ndarray, lags: list[float]) -> None:
    d = await StreamingDuplex.open(model, None)
    try:
        await push_in_chunks(d, x)
    finally:
        lags.append(d.max_input_lag)
    await d.close()


async def level(adapter: Adapter, url: str, sessions: int, concurrency: int,
                x: np.ndarray, child: Child) -> dict:
    model = adapter.build(url)
    gate = asyncio.Semaphore(min(concurrency, adapter.max_concurrency or concurrency))
    lags: list[float] = []
    errors: list[str] = []
    policy = RetryPolicy(max_attempts=2, backoff_base=0.1, jitter=True)

    async def one() -> None:
        async with gate:
            try:
                await run_with_retry(lambda: _session(model, x, lags), policy)
            except ModelError as e:
                errors.append(str(e))

    fake0, ours0, wall0 = child.cpu(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(sessions)))
    ours, wall = time.process_time() - ours0, time.perf_counter() - wall0
    fake = child.cpu() - fake0
    streamed = sessions * len(x) / SAMPLE_RATE
    return {"sessions": sessions, "concurrency": gate._value, "clip_s": len(x) / SAMPLE_RATE,
            "wall_s": round(wall, 2), "ours_cpu_s": round(ours, 3),
            "fake_cpu_s": round(fake, 3),
            "ours_ms_per_audio_s": round(1000 * ours / streamed, 2),
            "fake_ms_per_audio_s": round(1000 * fake / streamed, 2),
            "max_input_lag_ms": round(1000 * max(lags, default=0.0), 1),
            "errors": errors}


async def measure(name: str, sessions: int, concurrency: int, clip_s: float) -> dict:
    adapter = ADAPTERS[name]
    child = Child(name)
    try:
        x = clip(clip_s)
        # warm-up (imports, the SDK client, first connections): not measured
        await level(adapter, child.url, 2, 2, x, child)
        return await level(adapter, child.url, sessions, concurrency, x, child)
    finally:
        child.stop()


def table(rows: dict[str, dict]) -> str:
    out = ["| adapter | sessions | concurrency | ours ms / audio s / session | fake's "
           "| max input lag ms | errors | wall s |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['sessions']} | {r['concurrency']} | "
                   f"{r['ours_ms_per_audio_s']:.1f} | {r['fake_ms_per_audio_s']:.1f} | "
                   f"{r['max_input_lag_ms']:.1f} | {len(r['errors'])} | {r['wall_s']:.1f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", nargs="+", default=list(ADAPTERS), choices=list(ADAPTERS))
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--clip-s", type=float, default=4.0)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "duplexact-runs" / "benchmarks" / "streaming_cpu.json")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"  # never a real key against a fake
    rows = {}
    for name in args.adapters:
        rows[name] = asyncio.run(measure(name, args.sessions, args.concurrency, args.clip_s))
        print(f"{name}: {rows[name]['ours_ms_per_audio_s']} ms", file=sys.stderr, flush=True)
    print(table(rows))
    report = {"benchmark": "streaming_cpu", "python": platform.python_version(),
              "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
              "adapters": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
