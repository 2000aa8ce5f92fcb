"""Batched stepping below the wall clock (pipelines/lockstep.py, run/batch.py): trials in lockstep
give exactly the recordings they give alone, slots are reused at once or run in waves, one
slot's failure stays with its trial, and a hung shared call is a deadline, not a hang."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers.endpoint import EndpointModel
from pytest_duplexact.models.providers.oracle import OracleModel
from pytest_duplexact.models.providers.silent import SilentModel
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.pipelines.lockstep import BatchedDuplex, Batcher
from pytest_duplexact.pipelines.watchdog import ModelTimeout
from pytest_duplexact.run.batch import BatchRunner
from tests.pipelines.helpers import direct_instance, run, simulator_instance

# Direct Replay, Simulator Replay and barge-in, with the oracle speaking in each
KINDS = [("take_turn", "delayed"), ("stop", "direct_interruption"), ("interrupt", "help"),
         ("wait", "intra_sentential_pause"), ("recover", "repeat"),
         ("backchannel", "affirmative")]


@pytest.fixture(scope="module")
def insts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    return [simulator_instance(tmp, a, c) if a in ("stop", "recover") else
            direct_instance(tmp, a, c) for a, c in KINDS]


def same(a, b) -> bool:
    return (np.array_equal(a.output, b.output) and np.array_equal(a.input, b.input)
            and a.transcript == b.transcript and a.events == b.events and a.cue == b.cue
            and a.user_sent_until == b.user_sent_until)


async def lockstep(model, insts, size: int):
    """Every instance as a trial of one Batcher, as BatchRunner runs them (a slot each, in
    order, released at the end)."""
    batcher = Batcher(model, size)

    async def trial(inst):
        slot = await batcher.acquire()
        try:
            return await run_instance(inst, lambda info: BatchedDuplex(batcher, slot, info))
        finally:
            batcher.release(slot)

    return await asyncio.gather(*(trial(i) for i in insts), return_exceptions=True), batcher


class Counting(OracleModel):
    """The oracle, counting the slots of each shared call."""

    def open_batch(self, size):
        super().open_batch(size)
        self.calls: list[tuple[int, ...]] = []
        self.starts: list[tuple[int, int]] = []  # (call index, slot)

    def start_slot(self, slot, info):
        self.starts.append((len(self.calls), slot))
        super().start_slot(slot, info)

    def step_batch(self, frames):
        self.calls.append(tuple(frames))
        return super().step_batch(frames)


@pytest.mark.parametrize("make", [OracleModel, EndpointModel, SilentModel])
def test_a_trial_in_lockstep_records_what_it_records_alone(make, insts):
    alone = [run(run_instance(i, make())) for i in insts]
    for size in (1, 3, 8):
        got, _ = run(lockstep(make(), insts, size))
        assert all(same(a, b) for a, b in zip(alone, got)), size


def test_slots_are_shared_and_a_finished_slot_takes_the_next_trial_at_once(insts):
    m = Counting()
    got, batcher = run(lockstep(m, insts, 2))
    assert not [g for g in got if isinstance(g, BaseException)]
    assert max(len(c) for c in m.calls) == 2 and all(set(c) <= {0, 1} for c in m.calls)
    # the third trial starts in the middle of the run, while the other slot is stepping
    late = [(k, s) for k, s in m.starts if k > 0]
    assert late and any(0 < k < len(m.calls) and len(m.calls[k]) == 2 for k, _ in late[1:])
    assert batcher.progress.beats == len(m.calls)


def test_a_slot_released_after_its_loop_ended_frees_it_quietly():
    """A trial's coroutine closed by the garbage collector after its loop ended (a run torn
    down mid-trial) still releases its slot in ``finally``: no step is scheduled, no error."""
    batcher = Batcher(Counting(), 2)
    slot = asyncio.run(batcher.acquire())
    batcher.release(slot)  # no running loop here
    assert asyncio.run(batcher.acquire()) == slot


class Waves(Counting):
    """A model that cannot reset one slot alone; it answers for its running trials only."""

    slots_reset_alone = False

    def open_batch(self, size):
        super().open_batch(size)
        self.fed: list[dict] = []  # per call: slot -> (a trial runs in it, its frame)

    def step_batch(self, frames):
        self.fed.append({s: (s in self._slots, f) for s, f in frames.items()})
        return super().step_batch({s: f for s, f in frames.items() if s in self._slots})


def test_waves_when_a_slot_cannot_reset_alone(insts):
    m = Waves()
    alone = [run(run_instance(i, OracleModel())) for i in insts]
    got, batcher = run(lockstep(m, insts, 4))
    assert all(same(a, b) for a, b in zip(alone, got))
    assert "waves" in batcher.mode
    # two waves, each started together: 4 trials at the first call, 2 at a later one
    waves = sorted({k for k, _ in m.starts})
    assert len(waves) == 2 and waves[0] == 0 and len(m.starts) == 6
    second = waves[1]
    # every call steps the whole wave; a finished member is fed silence till the wave ends
    assert all(len(f) == 4 for f in m.fed[:second]) and all(len(f) == 2 for f in m.fed[second:])
    idle = [frame for f in m.fed[:second] for running, frame in f.values() if not running]
    assert idle and not any(frame.any() for frame in idle)


class CrashingSlot(OracleModel):
    def step(self, frame):
        if self.instance.action == "stop" and self.k == 30:
            raise RuntimeError("slot on fire")
        return super().step(frame)


def test_one_slots_crash_is_that_instances_error_alone(insts):
    alone = [run(run_instance(i, OracleModel())) for i in insts]
    got, _ = run(lockstep(CrashingSlot(), insts, 3))
    errors = [k for k, g in enumerate(got) if isinstance(g, BaseException)]
    assert errors == [1]
    assert isinstance(got[1], ModelError) and "slot on fire" in str(got[1])
    assert "stop" in str(got[1]) and "at 0.60 s" in str(got[1])
    assert all(same(alone[k], got[k]) for k in range(len(insts)) if k != 1)


class BadAnswer(SilentModel):
    def step_batch(self, frames):
        out = super().step_batch(frames)
        if 1 in out:  # the wrong frame size, for slot 1 only
            out[1] = np.zeros(7, dtype=np.float32)
        return out


def test_a_bad_answer_in_one_slot_is_checked_like_step(insts):
    got, _ = run(lockstep(BadAnswer(), insts[:2], 2))
    assert not isinstance(got[0], BaseException)
    assert isinstance(got[1], ModelError) and "returned (7,) samples" in str(got[1])


class RaisingCall(SilentModel):
    def step_batch(self, frames):
        raise RuntimeError("device lost")


def test_a_raising_shared_call_fails_every_trial_in_it(insts):
    got, _ = run(lockstep(RaisingCall(), insts[:3], 3))
    assert all(isinstance(g, ModelError) and "step_batch" in str(g) and "device lost" in str(g)
               for g in got)


class Hangs(SilentModel):
    """step_batch blocks while ``gate`` is closed and a trial of instance ``stuck`` is in it."""

    def __init__(self, gate: threading.Event, stuck: str):
        super().__init__()
        self.gate, self.stuck = gate, stuck

    def start_slot(self, slot, info):
        super().start_slot(slot, info)
        self._slots[slot].id = info.instance.id

    def step_batch(self, frames):
        if any(self._slots[s].id == self.stuck for s in frames):
            self.gate.wait(30)
        return super().step_batch(frames)


def test_a_hung_shared_call_is_a_deadline_and_the_run_goes_on(insts):
    gate = threading.Event()
    insts = insts[:3]
    model = Hangs(gate, insts[0].id)

    async def record(instance, factory):
        return await run_instance(instance, factory)

    runner = BatchRunner(model, record, 2, timeout=1.0)
    try:
        runner.submit(insts)
        with pytest.raises(ModelTimeout, match="did not answer for 1 s"):
            runner.result(insts[0])
        model.stuck = None  # the model works again: the rest run on a fresh lockstep
        assert [runner.result(i).duration > 0 for i in insts[1:]] == [True, True]
    finally:
        gate.set()
        runner.close()


class NoBatch(SilentModel):
    def open_batch(self, size):
        raise MemoryError("no room for 3 slots")


class NotAMapping(SilentModel):
    def step_batch(self, frames):
        return [np.zeros(320, dtype=np.float32)] * len(frames)


def test_open_batch_and_a_wrong_answer_type_are_model_errors(insts):
    got, _ = run(lockstep(NoBatch(), insts[:2], 3))
    assert all(isinstance(g, ModelError) and "open_batch(3): MemoryError" in str(g) for g in got)
    got, _ = run(lockstep(NotAMapping(), insts[:2], 2))
    assert all(isinstance(g, ModelError) and "returned list, not a mapping" in str(g)
               for g in got)
