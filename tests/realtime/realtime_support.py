"""Helpers for the realtime tests (and benchmarks/realtime_concurrency.py): the fake server
module, synthetic clips, and ``run_concurrently``, many streaming trials at once outside
pytest.

(A uniquely named module rather than conftest, so test files can import it by name.)"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

import numpy as np

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.base import ModelError
from pytest_duplexact.pipelines.streaming import run_with_retry
from pytest_duplexact.data.retry import STREAMING, RetryPolicy


def _load_fake_server(file: str = "realtime_server"):
    """tests/fakes is not a package: load a fake server by path, once."""
    name = f"duplexact_fake_{file}"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "fakes" / f"{file}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


fake = _load_fake_server()
minicpm_fake = _load_fake_server("minicpm_server")



def user_clip(spans: list[tuple[float, float]], total: float, hz: float = 300.0,
              amplitude: float = 0.3) -> np.ndarray:
    """16 kHz input: a tone burst ("speech") in each span, silence elsewhere. Span edges on
    20 ms boundaries make the fake server's VAD see them exactly."""
    x = np.zeros(int(round(total * SAMPLE_RATE)), np.float32)
    for start, end in spans:
        a, b = int(round(start * SAMPLE_RATE)), int(round(end * SAMPLE_RATE))
        t = np.arange(b - a) / SAMPLE_RATE
        x[a:b] = amplitude * np.sin(2 * np.pi * hz * t)
    return x


async def run_concurrently(jobs: Iterable[Callable[[], Awaitable[Any]]], concurrency: int,
                           policy: RetryPolicy = STREAMING) -> list:
    """Run every job with at most ``concurrency`` at once; results in job order.

    A job that fails with ``ModelError`` (after its retries) yields that error in its place,
    so one broken instance never sinks the others; any other exception is a bug and
    propagates (cancelling the rest)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    jobs = list(jobs)
    results: list[Any] = [None] * len(jobs)

    async def run(i: int, job: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            try:
                results[i] = await run_with_retry(job, policy)
            except ModelError as e:
                results[i] = e

    try:
        async with asyncio.TaskGroup() as tg:
            for i, job in enumerate(jobs):
                tg.create_task(run(i, job))
    except BaseExceptionGroup as group:  # surface the bug itself, not a wrapper
        raise group.exceptions[0]
    return results
