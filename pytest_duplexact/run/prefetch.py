"""Many streaming instances in flight inside one pytest process (``--duplexact-concurrency``).

pytest runs one test at a time, but a hosted model is bounded by the provider's rate limit,
not by one session: the tests about to run have their trials started ahead of time on a
background event loop, at most ``concurrency`` at once; each test then waits for its own
Recording. Only recording is prefetched; segmentation, judging and scoring stay in the test,
the CPU-heavy part of them (files, VAD) in the scoring worker's process (offload.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from concurrent.futures import Future
from typing import Callable

from ..pipelines import interrupt, watchdog
from ..pipelines.watchdog import DEFAULT_TIMEOUT, watch_async
from . import live_gc
from .admission import CONTROL_S, Aimd

# the instance whose trial runs in this context (set by Prefetcher._guarded, read by quieter)
_TRIAL: contextvars.ContextVar[str | None] = contextvars.ContextVar("duplexact_prefetch_trial",
                                                                   default=None)


class Prefetcher:
    """Trials ahead of their tests on one background loop, at most ``concurrency`` at once.

    With a timing ``tolerance`` (s) it also keeps the loop punctual: a new trial is admitted
    only while the loop's stalls over the last second (clock.LoopMonitor) are within the
    tolerance (waiting at most ``ADMIT_WAIT_S``: a machine that never calms down still runs,
    and each trial's own lateness decides), and under the in-flight cap of an AIMD controller
    (admission.py) that watches the loop's recent lateness every ``CONTROL_S``: cut before
    trials go late, raised again while there is headroom; a trial re-run for lateness first
    lowers the cap (``quieter``). Each trial's admission records the cap it ran under
    (``admitted_under``) and the loop thread's CPU is kept (``loop_cpu_s``): what
    ``measured.concurrency`` and the CPU per streamed second report."""

    ADMIT_WAIT_S = 5.0

    def __init__(self, run: Callable, concurrency: int, timeout: float = DEFAULT_TIMEOUT, *,
                 tolerance: float | None = None):
        self._run = run  # async (instance) -> Recording
        self.concurrency = concurrency
        self.timeout = timeout
        self.tolerance = tolerance
        # the in-flight cap: fixed at ``concurrency`` without a tolerance
        self.aimd = None if tolerance is None else Aimd(concurrency, tolerance)
        self._running = 0
        self._futures: dict[str, Future] = {}
        self.admitted_under: dict[str, int] = {}  # instance id -> the cap it was admitted under
        self.loop_cpu_s = 0.0  # the loop thread's CPU so far (read by its control task)
        self._cpu_reported = 0.0  # ... of it already in a trial's measure()
        # instance id -> seconds its attempts held a slot (streaming at 1x), and the part of
        # them it waited in ``quieter`` for a slot again
        self._in_flight_s: dict[str, float] = {}
        self._waited: dict[str, float] = {}
        self._cond: asyncio.Condition | None = None
        self._control: asyncio.Task | None = None
        self._gc_held = False  # live_gc.hold() done, release() due at close
        self._start_loop()

    @property
    def limit(self) -> int:
        """In-flight trials allowed now."""
        return self.concurrency if self.aimd is None else self.aimd.cap

    def _start_loop(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="duplexact-prefetch",
                                        daemon=True)
        self._thread.start()

    async def _controlled(self) -> None:
        """Every ``CONTROL_S`` while trials run: the cap from the loop's recent lateness."""
        from ..pipelines.clock import LoopMonitor

        monitor = LoopMonitor.of(self._loop)
        while True:
            self.loop_cpu_s = time.thread_time()
            live_gc.settle()  # an adapter's imports on its first session: frozen too
            if self.aimd is not None and self._cond is not None:
                before = self.aimd.cap
                now = self._loop.time()
                if self.aimd.observe(now, monitor.recent_lateness(), self._running) > before:
                    async with self._cond:
                        self._cond.notify_all()
            await asyncio.sleep(CONTROL_S)

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
        if self._control is None:
            self._control = asyncio.ensure_future(self._controlled())
        async with self._cond:  # no await after the slot is taken: cancelled = not held
            await self._cond.wait_for(lambda: self._running < self.limit)
            self._running += 1

    async def _release(self) -> None:
        async with self._cond:
            self._running -= 1
            self._cond.notify_all()

    async def quieter(self, attempt: int) -> None:
        """Before a trial's re-run for lateness (its slot held): halve the in-flight cap
        per attempt, give the slot back and wait for one under the new cap."""
        asked = self._loop.time()
        if self.aimd is not None:
            self.aimd.rerun(asked, attempt)
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
        trial = _TRIAL.get()
        if trial is not None:  # the attempt that may count runs under this cap
            self.admitted_under[trial] = self.limit
            self._waited[trial] = self._waited.get(trial, 0.0) + self._loop.time() - asked

    async def _guarded(self, instance):
        await self._acquire()
        self.admitted_under[instance.id] = self.limit
        _TRIAL.set(instance.id)  # this task's context, which its trial's tasks copy
        start = self._loop.time()
        try:
            return await watch_async(lambda: self._run(instance), timeout=self.timeout,
                                     what=f"instance {instance.id}")
        finally:
            self._in_flight_s[instance.id] = \
                self._loop.time() - start - self._waited.pop(instance.id, 0.0)
            await self._release()

    def submit(self, instances, admit: Callable[[], bool] | None = None) -> None:
        """Start trials for these instances (in order) unless already started; ``admit()``,
        when given, is asked before each new one (a budget: spend/budget.py) and a no ends
        the submission."""
        for inst in instances:
            if inst.id not in self._futures:
                if admit is not None and not admit():
                    return
                if not self._gc_held:  # before the first live session (live_gc.py)
                    from ..pipelines import streaming_duplex  # noqa: F401 -- imported, frozen

                    live_gc.hold()
                    self._gc_held = True
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
        future, poll = self._futures.pop(instance.id), watchdog._poll(self.timeout, None)
        try:
            while True:  # polled: a Ctrl-C a callback swallowed still ends the run
                try:
                    return future.result(timeout=poll)
                except TimeoutError:
                    interrupt.check()
        except KeyboardInterrupt:
            future.cancel()  # its trial ends with the run (close() no longer sees it)
            raise

    def measure(self, instance_id: str) -> dict | None:
        """What this trial says of the run's concurrency (admission.concurrency_measured
        sums them): the cap its last attempt was admitted under, the seconds its attempts
        streamed (held a slot: a session streams at 1x, stopped attempts included) and the
        loop thread's CPU since the last trial measured."""
        cap = self.admitted_under.pop(instance_id, None)
        if cap is None:
            return None
        cpu, self._cpu_reported = self.loop_cpu_s - self._cpu_reported, self.loop_cpu_s
        return {"requested": self.concurrency, "cap": cap,
                "stream_s": round(self._in_flight_s.pop(instance_id, 0.0), 3),
                "loop_cpu_s": round(cpu, 4)}

    def close(self) -> None:
        for f in self._futures.values():
            f.cancel()

        async def wind_down():  # cancelled trials close their sessions before the loop stops
            if self._control is not None:
                self._control.cancel()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if rest:
                await asyncio.wait(rest, timeout=watchdog._GRACE)
        try:
            try:
                asyncio.run_coroutine_threadsafe(wind_down(), self._loop).result(timeout=5)
            except Exception:  # a loop already gone or stuck: nothing more to wait for
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        finally:  # a Ctrl-C or a closed loop here must not leave the process frozen
            if self._gc_held:
                self._gc_held = False
                live_gc.release()
