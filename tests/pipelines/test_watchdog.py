"""Deadlines on the model (watchdog.py): a call that never returns ends its trial with an
error naming the instance and the call; slow but progressing models are never cut; SystemExit
from a model is contained to its instance."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines import run_instance, watchdog
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex, run_with_retry
from pytest_duplexact.pipelines.watchdog import ModelTimeout, run_watched
from pytest_duplexact.remote.retry import RetryPolicy
from tests.pipelines.helpers import direct_instance

FOREVER = threading.Event()  # never set: a wait on it never returns
# A trial that hangs forever must end by its deadline: well before this, however loaded the
# machine (the deadline's own timing is a benchmark's business, not a test verdict's).
ENDED_S = 60.0
# The deadline where a test makes a call hang: 50x the pushes and steps between the model's
# answers (20 ms), so that on a loaded machine only the hang reaches it, never a stall
# somewhere else, which would end the trial naming another call.
DEADLINE = 1.0


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    return direct_instance(tmp_path_factory.mktemp("wd"), "take_turn", "immediate")


class Stepped:
    name = "stepped"
    sample_rate, frame_size = 16_000, 320

    def __init__(self, hang_at=None, delay=0.0, exit_at=None):
        self.hang_at, self.delay, self.exit_at = hang_at, delay, exit_at
        self.k = 0

    def start(self, info):
        self.k = 0

    def step(self, frame):
        self.k += 1
        if self.k == self.hang_at:
            FOREVER.wait()
        if self.k == self.exit_at:
            raise SystemExit(3)
        if self.delay:
            time.sleep(self.delay)
        return np.zeros(self.frame_size, np.float32)

    def finish(self):
        pass


def trial(model, inst, timeout):
    return run_watched(lambda: run_instance(inst, model, SessionInfo(inst)), timeout=timeout,
                       what=f"instance {inst.id}")


def test_a_step_that_never_returns_is_an_error_naming_the_call(inst):
    t0 = time.monotonic()
    with pytest.raises(ModelTimeout) as e:
        trial(Stepped(hang_at=30), inst, timeout=DEADLINE)
    assert time.monotonic() - t0 < ENDED_S
    msg = str(e.value)
    assert f"instance {inst.id}" in msg and f"did not answer for {DEADLINE:g} s" in msg
    assert "Stepped.step (" in msg and "SteppedDuplex._step" in msg


class Late(Stepped):
    """Its first trial's step 30 returns only after ``late_s`` (well past the deadline); every
    call is logged with the trial it belongs to, so a call from the abandoned trial's thread
    into the next trial's model state shows."""

    def __init__(self):
        super().__init__()
        self.trials, self.calls = 0, []
        self.release, self.returned = threading.Event(), threading.Event()

    def start(self, info):
        super().start(info)
        self.trials += 1
        self.calls.append(("start", self.trials))

    def step(self, frame):
        mine = self.trials
        if mine == 1 and self.k == 29:  # late until the test lets it return
            self.release.wait(ENDED_S)
            self.returned.set()
        self.calls.append(("step", mine))
        return super().step(frame)

    def finish(self):
        self.calls.append(("finish", self.trials))


def test_an_abandoned_trial_never_calls_the_model_again(inst):
    """The deadline gives up on trial 1 while its step still runs; trial 2 starts on the same
    model. When the late step returns, trial 1's thread unwinds without another step and
    without finish(), which would reset trial 2's state."""
    model = Late()
    with pytest.raises(ModelTimeout):
        trial(model, inst, timeout=DEADLINE)
    done = len(model.calls)
    rec = trial(model, inst, timeout=ENDED_S)  # runs while trial 1's step is still asleep
    model.release.set()
    assert model.returned.wait(ENDED_S)
    time.sleep(0.2)  # room for trial 1's thread to have done anything it would do
    assert len(rec.output) == len(rec.input)
    late = [c for c in model.calls[done:] if c[0] != "start" and c[1] == 1]
    assert late == [("step", 1)], late  # only the step that was in flight, nothing after it
    assert model.calls.count(("finish", 2)) == 1


def test_a_slow_model_that_keeps_answering_is_never_cut(inst):
    t0 = time.monotonic()
    # each step takes 2 ms, the deadline is 1 s: a loaded machine stalls a thread for far less
    # than that, and the trial as a whole outlasts the deadline (only progress keeps it alive)
    rec = trial(Stepped(delay=0.002), inst, timeout=1.0)
    assert time.monotonic() - t0 > 1.0
    assert len(rec.output) == len(rec.input)


def test_system_exit_from_a_model_is_that_instances_model_error(inst):
    with pytest.raises(ModelError, match=r"raised SystemExit\(3\); contained to this instance"):
        trial(Stepped(exit_at=5), inst, timeout=5)
    # the next trial on the same process runs normally
    assert trial(Stepped(), inst, timeout=5).output.size > 0


class Streaming:
    input_sample_rate = output_sample_rate = 16_000

    def __init__(self, hang_in):
        self.hang_in = hang_in

    async def connect(self, info):
        if self.hang_in == "connect":
            await asyncio.Event().wait()
        return Session(self.hang_in)


class Session:
    def __init__(self, hang_in):
        self.hang_in = hang_in
        self.closed = asyncio.Event()
        self.sent = 0

    async def send(self, pcm):
        self.sent += 1
        if self.hang_in == "send" and self.sent == 3:
            await asyncio.Event().wait()

    async def events(self):
        await self.closed.wait()
        return
        yield  # an async generator with no events

    async def truncate(self, item_id, audio_end_ms):
        pass

    async def close(self):
        self.closed.set()
        if self.hang_in == "close":
            await asyncio.Event().wait()


async def short_trial(model, inst):
    """Connect, send 0.2 s, close: a whole trial in well under a second of wall clock."""
    duplex = await StreamingDuplex.open(model, SessionInfo(inst))
    await duplex.push(np.zeros(3200, np.float32))
    return await duplex.close()


@pytest.mark.parametrize("where", ["connect", "send", "close"])
def test_a_streaming_call_that_never_returns_is_an_error_naming_it(inst, where):
    t0 = time.monotonic()
    with pytest.raises(ModelTimeout) as e:
        run_watched(lambda: short_trial(Streaming(where), inst), timeout=DEADLINE,
                    what=f"instance {inst.id}")
    assert time.monotonic() - t0 < ENDED_S
    assert f"Session.{where} (" in str(e.value) or f"Streaming.{where} (" in str(e.value)


def test_prefetched_trials_are_watched_on_their_shared_loop(inst):
    async def go():
        return await watchdog.watch_async(
            lambda: run_instance(inst, Streaming("connect"), SessionInfo(inst)), timeout=DEADLINE,
            what=f"instance {inst.id}")

    with pytest.raises(ModelTimeout, match=r"Streaming\.connect \("):
        asyncio.run(go())


class FailsFast:
    """A streaming model that fails transiently at once: its server refuses the connection
    (``connect``), or its session's send raises TransientModelError (``send``). From attempt
    ``hang_from`` on, its connect never returns instead."""

    input_sample_rate = output_sample_rate = 16_000

    def __init__(self, where, hang_from=None):
        self.where, self.hang_from, self.attempts = where, hang_from, 0

    async def connect(self, info):
        self.attempts += 1
        if self.hang_from is not None and self.attempts >= self.hang_from:
            await asyncio.Event().wait()
        if self.where == "connect":
            raise ConnectionRefusedError(111, "Connection refused")
        return Refusing()


class Refusing(Session):
    def __init__(self):
        super().__init__(None)

    async def send(self, pcm):
        raise TransientModelError("rate limited")


OWN_ERROR = {"connect": r"could not connect: ConnectionRefusedError.*\(gave up after 4 attempts\)",
             "send": r"rate limited \(gave up after 4 attempts\)"}


@pytest.mark.parametrize("where", ["connect", "send"])
def test_the_backoff_between_attempts_is_not_the_models_silence(inst, where):
    """The retry backoff (0.5-1, 1-2, 2-4 s: longer than this deadline) is the harness's own
    wait: a model that fails fast is reported for its own error once the attempts run out,
    not as "did not answer ... waiting in sleep, called from run_with_retry"."""
    model = FailsFast(where)
    t0 = time.monotonic()
    with pytest.raises(ModelError, match=OWN_ERROR[where]) as e:
        trial(model, inst, timeout=DEADLINE)
    assert not isinstance(e.value, ModelTimeout), e.value
    assert model.attempts == 4
    assert time.monotonic() - t0 < ENDED_S


# waits between attempts of 1.5x the deadline, three attempts: 3 s of backoff in all
SLOW_BACKOFF = RetryPolicy(max_attempts=3, backoff_base=1.5 * DEADLINE,
                           backoff_cap=1.5 * DEADLINE)


def test_the_backoff_is_not_the_models_silence_on_a_shared_loop_either(inst):
    async def go():
        return await watchdog.watch_async(
            lambda: run_with_retry(lambda: short_trial(FailsFast("connect"), inst),
                                   SLOW_BACKOFF),
            timeout=DEADLINE, what=f"instance {inst.id}")

    with pytest.raises(ModelError, match=r"ConnectionRefusedError.*after 3 attempts") as e:
        asyncio.run(go())
    assert not isinstance(e.value, ModelTimeout), e.value


@pytest.mark.parametrize("shared_loop", [False, True])
def test_a_model_that_hangs_after_a_retry_is_still_timed_out(inst, shared_loop):
    """The deadline starts again when the backoff ends: the second attempt's connect, which
    never returns, is caught and named."""
    model = FailsFast("connect", hang_from=2)

    def job():
        return run_with_retry(lambda: short_trial(model, inst), SLOW_BACKOFF)

    async def on_a_shared_loop():
        return await watchdog.watch_async(job, timeout=DEADLINE, what=f"instance {inst.id}")

    t0 = time.monotonic()
    with pytest.raises(ModelTimeout, match=r"FailsFast\.connect \(") as e:
        if shared_loop:
            asyncio.run(on_a_shared_loop())
        else:
            run_watched(job, timeout=DEADLINE, what=f"instance {inst.id}")
    assert time.monotonic() - t0 < ENDED_S
    assert model.attempts == 2 and f"did not answer for {DEADLINE:g} s" in str(e.value)


def test_beats_outside_a_watch_go_nowhere():
    before = watchdog.current().beats
    watchdog.beat()
    assert watchdog.current() is watchdog._UNWATCHED and watchdog.current().beats == before + 1
