"""``--duplexact-batch=B``: the tests about to run have their stepped trials recorded ahead,
B at a time in lockstep (pipelines/lockstep.py), on a background event loop, like the streaming
prefetch (prefetch.py) whose look-ahead and hand-over it shares; each test then waits for its
own Recording. Only recording is batched; segmentation, judging and scoring stay in the test.

Deadlines. Each trial is watched on the loop (``watch_async``) for a slot that stops
answering while the others go on; and the waiting test watches the lockstep itself: a model
call that does not return blocks the loop, so when no step has completed for ``timeout``
seconds the waiting instance is a ModelTimeout naming the call, the stuck lockstep is
abandoned (its call, if it ever returns, unwinds every trial in it without touching the model
again), and the instances it held are run again on a fresh one when their tests come.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time

from ..pipelines import interrupt
from ..pipelines.lockstep import BatchedDuplex, Batcher
from ..pipelines.watchdog import _GRACE, _poll, _Progress, _stack, _timed_out, describe, watch_async
from .prefetch import Prefetcher


class BatchRunner(Prefetcher):
    def __init__(self, model, run, size: int, timeout: float):
        self.model = model
        self._record = run  # async (instance, model-or-factory) -> Recording
        super().__init__(None, size, timeout)
        self.batcher = Batcher(model, size)

    async def _guarded(self, instance):
        batcher = self.batcher
        slot = await batcher.acquire()
        try:
            return await watch_async(
                lambda: self._record(instance, lambda info: BatchedDuplex(batcher, slot, info)),
                timeout=self.timeout, what=f"instance {instance.id}")
        finally:
            batcher.release(slot)

    def result(self, instance):
        """The instance's Recording; a lockstep that makes no progress for ``timeout`` seconds
        is this instance's ModelTimeout (module doc)."""
        self.submit([instance])
        future = self._futures[instance.id]
        batcher = self.batcher
        poll, progress = _poll(self.timeout, None), _Progress(batcher.progress, time.monotonic())
        while True:
            try:
                value = future.result(timeout=poll)
            except concurrent.futures.TimeoutError:
                interrupt.check()  # a swallowed Ctrl-C still ends the run (pipelines/interrupt)
                if progress.silent_for(time.monotonic()) < self.timeout:
                    continue
                where = describe(_stack(sys._current_frames().get(self._thread.ident)))
                self._abandon()
                raise _timed_out(f"instance {instance.id}", self.timeout, where) from None
            except BaseException:
                self._futures.pop(instance.id, None)
                future.cancel()  # a Ctrl-C: its trial ends with the run (done: no-op)
                raise
            self._futures.pop(instance.id, None)
            return value

    def _abandon(self) -> None:
        """Leave the stuck loop (a daemon thread) and start a fresh lockstep for the rest."""
        self.batcher.abandoned = True
        for f in self._futures.values():
            f.cancel()
        self._futures.clear()
        asyncio.run_coroutine_threadsafe(_wind_down(), self._loop)
        self._start_loop()
        self.batcher = Batcher(self.model, self.concurrency)


async def _wind_down() -> None:
    """On an abandoned loop, once its call returns: let the cancelled trials unwind, then
    stop the loop (its thread ends)."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if rest:
        await asyncio.wait(rest, timeout=_GRACE)
    asyncio.get_running_loop().stop()
