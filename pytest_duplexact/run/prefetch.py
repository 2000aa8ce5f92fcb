"""Many streaming instances in flight inside one pytest process (``--duplexact-concurrency``).

pytest runs one test at a time, but a hosted model is bounded by the provider's rate limit,
not by one session: the tests about to run have their trials started ahead of time on a
background event loop, at most ``concurrency`` at once; each test then waits for its own
Recording. Only recording is prefetched; segmentation, judging and scoring stay in the test.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Callable

from ..pipelines.watchdog import DEFAULT_TIMEOUT, watch_async


class Prefetcher:
    def __init__(self, run: Callable, concurrency: int, timeout: float = DEFAULT_TIMEOUT):
        self._run = run  # async (instance) -> Recording
        self.concurrency = concurrency
        self.timeout = timeout
        self._futures: dict[str, Future] = {}
        self._sem: asyncio.Semaphore | None = None
        self._start_loop()

    def _start_loop(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="duplexact-prefetch",
                                        daemon=True)
        self._thread.start()

    async def _guarded(self, instance):
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            return await watch_async(lambda: self._run(instance), timeout=self.timeout,
                                     what=f"instance {instance.id}")

    def submit(self, instances, admit: Callable[[], bool] | None = None) -> None:
        """Start trials for these instances (in order) unless already started; ``admit()``,
        when given, is asked before each new one (a budget: report/budget.py) and a no ends
        the submission."""
        for inst in instances:
            if inst.id not in self._futures:
                if admit is not None and not admit():
                    return
                self._futures[inst.id] = asyncio.run_coroutine_threadsafe(
                    self._guarded(inst), self._loop)

    def started(self, instance_id: str) -> bool:
        return instance_id in self._futures

    def in_flight(self) -> int:
        return sum(not f.done() for f in self._futures.values())

    def result(self, instance):
        """The instance's Recording (started now if it was not prefetched); re-raises the
        trial's exception, so a failed session is that instance's error."""
        self.submit([instance])
        return self._futures.pop(instance.id).result()

    def close(self) -> None:
        for f in self._futures.values():
            f.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
