"""Many streaming instances in flight inside one pytest process (``--duplexact-concurrency``).

pytest runs one test at a time, but a hosted model is bounded by the provider's rate limit,
not by one session: the tests about to run have their trials started ahead of time on a
background event loop, at most ``concurrency`` at once; each test then waits for its own
Recording. Only recording is prefetched; segmentation, judging and scoring stay in the test,
the CPU-heavy part of them (files, VAD) in the scoring worker's process (offload.py).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Callable

from ..pipelines import watchdog
from ..pipelines.watchdog import DEFAULT_TIMEOUT, watch_async


class Prefetcher:
    """Trials ahead of their tests on one background loop, at most ``concurrency`` at once.

    With a timing ``tolerance`` (s) it also keeps the loop punctual (issue 33): a new trial is
    admitted only while the loop's stalls over the last second (clock.LoopMonitor) are within
    the tolerance (waiting at most ``ADMIT_WAIT_S``: a machine that never calms down still
    runs, and each trial's own lateness decides); a trial re-run for lateness first lowers
    the in-flight limit (``quieter``); each trial that finishes on time raises it by one."""

    ADMIT_WAIT_S = 5.0

    def __init__(self, run: Callable, concurrency: int, timeout: float = DEFAULT_TIMEOUT, *,
                 tolerance: float | None = None):
        self._run = run  # async (instance) -> Recording
        self.concurrency = concurrency
        self.timeout = timeout
        self.tolerance = tolerance
        self.limit = concurrency  # in-flight trials allowed now (lowered by quieter)
        self._running = 0
        self._futures: dict[str, Future] = {}
        self._cond: asyncio.Condition | None = None
        self._start_loop()

    def _start_loop(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="duplexact-prefetch",
                                        daemon=True)
        self._thread.start()

    def _calm(self) -> bool:
        from ..pipelines.clock import LoopMonitor

        return self.tolerance is None or \
            LoopMonitor.of(self._loop).recent_stall() <= self.tolerance

    async def _acquire(self) -> None:
        """A slot: fewer than ``limit`` trials running and, briefly waited for, a calm loop."""
        deadline = self._loop.time() + self.ADMIT_WAIT_S
        while not self._calm() and self._loop.time() < deadline:
            watchdog.beat()  # waiting on the machine, not on the model
            await asyncio.sleep(0.05)
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:  # no await after the slot is taken: cancelled = not held
            await self._cond.wait_for(lambda: self._running < self.limit)
            self._running += 1

    async def _release(self) -> None:
        async with self._cond:
            self._running -= 1
            self._cond.notify_all()

    async def quieter(self, attempt: int) -> None:
        """Before a trial's re-run for lateness (its slot held): halve the in-flight limit
        per attempt, give the slot back and wait for one under the new limit."""
        self.limit = max(1, min(self.limit, self.concurrency >> attempt))
        await self._release()
        waiting = asyncio.ensure_future(self._acquire())
        try:
            while not waiting.done():  # the watchdog deadline is on the model, not this wait
                watchdog.beat()
                await asyncio.wait({waiting}, timeout=1.0)
        except asyncio.CancelledError:
            if not (waiting.done() and not waiting.cancelled()):
                waiting.cancel()
                self._running += 1  # the slot _guarded gives back when the trial ends
            raise
        waiting.result()

    async def _guarded(self, instance):
        await self._acquire()
        try:
            recording = await watch_async(lambda: self._run(instance), timeout=self.timeout,
                                          what=f"instance {instance.id}")
        finally:
            await self._release()
        if self.limit < self.concurrency:  # on time again: one more trial may stream
            self.limit += 1
            async with self._cond:
                self._cond.notify_all()
        return recording

    def submit(self, instances, admit: Callable[[], bool] | None = None) -> None:
        """Start trials for these instances (in order) unless already started; ``admit()``,
        when given, is asked before each new one (a budget: spend/budget.py) and a no ends
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
