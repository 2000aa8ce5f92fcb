"""Our CPU per streamed audio second per session, per streaming adapter, against its fake.

Each adapter's fake server (tests/fakes/) runs in a child process of its own (this module
with ``--serve``), so its work neither shares our event loop nor counts as ours: the child
reports its own ``time.process_time()`` when asked. In this process, N sessions at
concurrency C each run a Direct Replay trial through the adapter and ``StreamingDuplex`` (a
bundled instance's user track, replicated over the sessions, then the observation period's
silence, in the pipeline's 40 ms pushes on the wall clock), the fake answering each turn. Our
CPU time (user + system, ``os.times()``) over the level, divided by the audio seconds
streamed, is the figure: CPU milliseconds per streamed audio second per session. A server
that holds one session at a time (moshi-server, the scripted bridge) streams
``--serial-sessions`` one after the other.

    python -m benchmarks.streaming_cpu [--adapters gpt-realtime ...] [--sessions 48]
                                       [--concurrency 32] [--chunk-ms 20] [--out FILE]

Prints one table and writes JSON. Sends nothing beyond 127.0.0.1 (dummy keys).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import numpy as np

from pytest_duplexact.data import audio
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.data.instance import bundled_root
from pytest_duplexact.data.taxonomy import OBSERVATION_PERIOD_S
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.pipelines.direct import push_in_chunks
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex, run_with_retry
from pytest_duplexact.remote.retry import RetryPolicy

ROOT = Path(__file__).resolve().parents[1]


# --- the fakes, each served from a child process ---------------------------------------------
# Each ``serve`` is an async context manager yielding (url, environment the client needs).

@contextlib.asynccontextmanager
async def _realtime_server() -> AsyncIterator[tuple[str, dict]]:
    from tests.fakes import realtime_server as fake

    script = fake.Script(answer_after_ms=300.0, speak_s=1.0, pace=4.0)
    async with fake.FakeRealtimeServer(script) as server:
        yield server.base_url, {}


@contextlib.asynccontextmanager
async def _gemini_server() -> AsyncIterator[tuple[str, dict]]:
    from tests.fakes import gemini_server as fake

    with tempfile.TemporaryDirectory() as tmp:
        ca = str(Path(tmp) / "ca.pem")
        ctx, _ = fake.make_tls(ca)
        async with fake.FakeGeminiServer(ctx, fake.Script(speak_s=1.0)) as server:
            yield server.base_url, {"SSL_CERT_FILE": ca}


@contextlib.asynccontextmanager
async def _vllm_omni_server() -> AsyncIterator[tuple[str, dict]]:
    from tests.fakes import vllm_omni_server as fake

    async with fake.FakeVllmOmniServer(fake.Script(max_sessions=256)) as server:
        yield server.url, {}


@contextlib.asynccontextmanager
async def _socketio_server() -> AsyncIterator[tuple[str, dict]]:
    from tests.fakes import socketio_server as fake

    script = fake.Script(segments=2, segment_s=0.6, max_users=256)
    async with fake.FakeOmniServer("freeze-omni", script) as server:
        yield server.url, {}


@contextlib.asynccontextmanager
async def _moshi_server() -> AsyncIterator[tuple[str, dict]]:
    from tests.fakes import moshi_server as fake

    async with fake.FakeMoshiServer() as server:
        yield server.url, {}


@contextlib.asynccontextmanager
async def _bridge_server() -> AsyncIterator[tuple[str, dict]]:
    from pytest_duplexact.bridges.kit import BridgeServer
    from tests.fakes import bridge_server as fake

    model = fake.ScriptedBridge(fake.Script(model="at", mode="streaming", speak_at_s=1.5))
    server = BridgeServer(model, max_sessions=1)
    url = await server.start("127.0.0.1", 0)
    try:
        yield url, {}
    finally:
        await server.close()


@dataclass(frozen=True)
class Adapter:
    """How to serve an adapter's fake (in the child) and build the model (here)."""

    serve: Callable[[], Any]          # an async context manager yielding (url, env)
    build: Callable[[str, float], Any]  # (url, chunk_ms) -> model
    max_concurrency: int | None = None  # the server's own limit (one session at a time)


def _gpt_realtime(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.gpt_realtime import factory

    return factory(base_url=url, silence_duration_ms="200", chunk_ms=str(chunk_ms))


def _gemini_live(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.gemini_live import factory

    return factory(base_url=url, silence_duration_ms="200", chunk_ms=str(chunk_ms))


def _vllm_omni(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.vllm_omni import factory

    return factory(url=url)


def _freeze_omni(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.socketio_omni import freeze_omni

    return freeze_omni(server_url=url, verify="false")


def _moshi(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.moshi_server import factory

    return factory(url=url)


def _bridge(url: str, chunk_ms: float):
    from pytest_duplexact.models.providers.bridge import factory

    return factory(url=url)


ADAPTERS: dict[str, Adapter] = {
    "gpt-realtime": Adapter(_realtime_server, _gpt_realtime),
    "gemini-live": Adapter(_gemini_server, _gemini_live),
    "vllm-omni": Adapter(_vllm_omni_server, _vllm_omni),
    "freeze-omni": Adapter(_socketio_server, _freeze_omni),
    "bridge-streaming": Adapter(_bridge_server, _bridge, max_concurrency=1),
    "moshi-server": Adapter(_moshi_server, _moshi, max_concurrency=1),
}


def _serve(name: str) -> None:
    """The child: serve ``name``'s fake, print ``PORT``-style ``URL <url>``, answer ``cpu``
    with this process's CPU seconds, stop when stdin closes."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with ADAPTERS[name].serve() as (url, env):
            print(f"URL {json.dumps({'url': url, 'env': env})}", flush=True)
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
        served = json.loads(line.split(None, 1)[1])
        self.url, self.env = served["url"], served["env"]

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

def user_clips(limit: int = 12) -> list[np.ndarray]:
    """The bundled instances' user tracks (the Direct Replay input), a few distinct ones."""
    paths = sorted((bundled_root() / "audio").glob("*.user.flac"))[:limit]
    return [audio.read(path) for path in paths]


async def _session(model, user: np.ndarray, observation_s: float, lags: list[float]) -> None:
    """One Direct Replay trial: the user's track, then the observation's silence, in the
    pipeline's 40 ms pushes on the wall clock."""
    d = await StreamingDuplex.open(model, None)
    try:
        await push_in_chunks(d, user)
        await push_in_chunks(d, audio.silence(observation_s))
    finally:
        lags.append(d.max_input_lag)
    await d.close()


async def level(model, sessions: int, concurrency: int, clips: list[np.ndarray],
                observation_s: float, child: Child) -> dict:
    gate = asyncio.Semaphore(concurrency)
    lags: list[float] = []
    errors: list[str] = []
    policy = RetryPolicy(max_attempts=2, backoff_base=0.1, jitter=True)

    async def one(user: np.ndarray) -> None:
        async with gate:
            try:
                await run_with_retry(lambda: _session(model, user, observation_s, lags),
                                     policy)
            except ModelError as e:
                errors.append(str(e))

    fake0, ours0, wall0 = child.cpu(), os.times(), time.perf_counter()
    users = [clips[i % len(clips)] for i in range(sessions)]  # the instances, replicated
    await asyncio.gather(*(one(user) for user in users))
    ours1, wall = os.times(), time.perf_counter() - wall0
    fake = child.cpu() - fake0
    user, system = ours1.user - ours0.user, ours1.system - ours0.system
    streamed = sum(len(u) / SAMPLE_RATE + observation_s for u in users)

    def per_s(cpu: float) -> float:
        return round(1000 * cpu / streamed, 2)

    return {"sessions": sessions, "concurrency": concurrency,
            "streamed_s": round(streamed, 1),
            "wall_s": round(wall, 2), "ours_cpu_s": round(user + system, 3),
            "fake_cpu_s": round(fake, 3), "ours_ms_per_audio_s": per_s(user + system),
            "ours_user_ms_per_audio_s": per_s(user),
            "ours_system_ms_per_audio_s": per_s(system), "fake_ms_per_audio_s": per_s(fake),
            "max_input_lag_ms": round(1000 * max(lags, default=0.0), 1), "errors": errors}


async def measure(name: str, args: argparse.Namespace) -> dict:
    adapter = ADAPTERS[name]
    child = Child(name)
    try:
        os.environ.update(child.env)
        model = adapter.build(child.url, args.chunk_ms)
        clips = user_clips()
        # a server that holds one session at a time streams them one after the other
        concurrency = min(args.concurrency, adapter.max_concurrency or args.concurrency)
        sessions = args.sessions if concurrency == args.concurrency else \
            min(args.sessions, args.serial_sessions)
        # warm-up (imports, the SDK client, first connections): not measured
        await level(model, min(2, sessions), min(2, concurrency), clips[:1], 0.5, child)
        row = await level(model, sessions, concurrency, clips, args.observation_s, child)
        return {**row, "chunk_ms": args.chunk_ms}
    finally:
        child.stop()
        for key in child.env:
            os.environ.pop(key, None)


class _NoSend:
    """A session that sends nothing and never answers: the duplex's own cost, alone."""

    async def send(self, pcm) -> None:
        pass

    async def events(self):
        await asyncio.Event().wait()
        yield None  # never reached

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        pass

    async def close(self) -> None:
        pass


async def duplex_alone(sessions: int, seconds: float = 5.0) -> float:
    """CPU ms per audio second per session of ``StreamingDuplex`` itself (24 kHz model,
    40 ms pushes of a prerecorded track), ``sessions`` at once, with no network."""
    user = audio.silence(seconds) + np.float32(0.01)

    async def one() -> None:
        d = StreamingDuplex(_NoSend(), input_sample_rate=24_000, output_sample_rate=24_000)
        await push_in_chunks(d, user)
        await d.close()

    cpu0 = time.process_time()
    await asyncio.gather(*(one() for _ in range(sessions)))
    return round(1000 * (time.process_time() - cpu0) / (sessions * seconds), 2)


def table(rows: dict[str, dict]) -> str:
    out = ["| adapter | sessions | at once | ours: ms CPU / audio s / session (user + system) "
           "| the fake's (its process) | max input lag ms | errors | wall s |",
           "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['sessions']} | {r['concurrency']} | "
                   f"{r['ours_ms_per_audio_s']:.1f} ({r['ours_user_ms_per_audio_s']:.1f} + "
                   f"{r['ours_system_ms_per_audio_s']:.1f}) | {r['fake_ms_per_audio_s']:.1f} | "
                   f"{r['max_input_lag_ms']:.1f} | {len(r['errors'])} | {r['wall_s']:.1f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", nargs="+", default=list(ADAPTERS), choices=list(ADAPTERS))
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--serial-sessions", type=int, default=4,
                        help="sessions for a server that holds one at a time")
    parser.add_argument("--observation-s", type=float, default=OBSERVATION_PERIOD_S,
                        help="silence after each user track (Direct Replay's)")
    parser.add_argument("--chunk-ms", type=float, default=20.0,
                        help="the OpenAI-style adapters' chunk_ms (docs/realtime.md)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "duplexact-runs" / "benchmarks" / "streaming_cpu.json")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    # a session that the fake closes while its last chunk is in flight makes asyncio log
    # every write after it (hundreds of lines at 48 sessions): a figure, not a log, is wanted
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    # never a real key against a fake
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"
    os.environ["GEMINI_API_KEY"] = "AIza-fake-benchmark"
    rows = {}
    for name in args.adapters:
        rows[name] = asyncio.run(measure(name, args))
        print(f"{name}: {rows[name]['ours_ms_per_audio_s']} ms", file=sys.stderr, flush=True)
    print(table(rows))
    alone = asyncio.run(duplex_alone(args.concurrency))
    print(f"StreamingDuplex alone (no network), {args.concurrency} sessions: {alone} ms CPU "
          "per audio second per session")
    report = {"benchmark": "streaming_cpu", "python": platform.python_version(),
              "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
              "adapters": rows, "duplex_alone_ms_per_audio_s": alone}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
