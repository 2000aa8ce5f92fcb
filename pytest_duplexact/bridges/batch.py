"""Batched stepping behind a bridge: one model call per tick for every open trial.

A stepped bridge model that offers ``step_batch(steps)`` (``steps``: a list of
``(session, frame)``, one per trial; the answer: a list in the same order of what each
``session.step`` would return, or an Exception for a trial that failed alone) is stepped by
``BatchStepper``: each connection's frame waits until every open trial has sent its own, then
all go to the model in one call. A trial whose client is slow to send does not hold the
others for long: after ``gather_s`` the frames that are there go without it. Combined with
``max_sessions = B`` (trials at once), B clients (``--duplexact-batch=B`` of one pytest process,
or B processes) share each step. Only the model's output must not depend on which trials share
a call (the slots of its batch are independent).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import numpy as np

from .kit import Stepper

GATHER_S = 0.05  # how long a tick waits for a trial that has not sent its frame yet


def batched(model: Any) -> bool:
    return getattr(model, "mode", "") == "stepped" and callable(getattr(model, "step_batch",
                                                                        None))


class BatchStepper(Stepper):
    """``Stepper`` whose steps are gathered into ``model.step_batch`` calls; ``open_trials()``
    counts the trials that will send a frame (``len(BridgeServer.sessions)``)."""

    def __init__(self, model: Any, open_trials: Callable[[], int], gather_s: float = GATHER_S):
        super().__init__()
        self.model, self.open_trials, self.gather_s = model, open_trials, gather_s
        self._pending: list[tuple[Any, np.ndarray, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.calls: list[int] = []  # trials per model call (the log's and the tests')

    async def step(self, session: Any, frame: np.ndarray) -> Any:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._pending.append((session, frame, done))
        if len(self._pending) >= self.open_trials():
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.gather_s, self._flush)
        return await done

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.calls.append(len(batch))
        call = asyncio.ensure_future(self.call(self.model.step_batch,
                                               [(s, f) for s, f, _ in batch]))
        call.add_done_callback(lambda c: _hand_out(c, batch))

    def shutdown(self) -> None:
        for _, _, done in self._pending:
            done.cancel()
        self._pending = []
        super().shutdown()


def _hand_out(call: asyncio.Future, batch: list) -> None:
    """Each trial's answer to its own step: one failed trial fails alone; a call that raised
    (or answered for the wrong number of trials) fails every trial in it."""
    futures = [done for _, _, done in batch]
    if call.cancelled():
        answers: Any = asyncio.CancelledError()
    elif call.exception() is not None:
        answers = call.exception()
    else:
        answers = call.result()
        if not isinstance(answers, (list, tuple)) or len(answers) != len(batch):
            answers = RuntimeError(f"step_batch answered {type(answers).__name__} "
                                   f"{len(answers) if isinstance(answers, (list, tuple)) else ''}"
                                   f" for {len(batch)} trials; expected a list, one answer each")
    for k, done in enumerate(futures):
        if done.done():
            continue
        one = answers if isinstance(answers, BaseException) else answers[k]
        if isinstance(one, BaseException):
            done.set_exception(one)
        else:
            done.set_result(one)
