"""The moshi adapter's batched stepping (``step_batch`` with Mimi and ``LMGen`` at batch B) on
the tiny random Moshi (moshi_tiny.py): with greedy sampling each slot's output depends only
on its own input (two trials in one batch, one starting late in a reused slot, vs each alone),
B = 1 batched is the unbatched adapter exactly, a sampled batched run is deterministic, the
real pipelines run through the lockstep, and the batched moshi bridge gives the same."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytest_duplexact.models import is_batched, resolve_model
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines.bargein import BargeInReplay
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.lockstep import BatchedDuplex, Batcher
from tests.pipelines.helpers import direct_instance, run
from tests.pipelines.test_lockstep import same

pytest.importorskip("moshi", reason="moshi is installed by .ci/run (pip install --no-deps)")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")

F = 1920
GREEDY = {"temp": "0", "temp_text": "0"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from tests.models.providers.moshi_tiny import write_checkpoints

    return write_checkpoints(tmp_path_factory.mktemp("moshi-tiny-batch"))


@pytest.fixture(scope="module")
def greedy(checkpoints):
    """One greedy model for the module: its first batched step warms torch up (seconds)."""
    return model(checkpoints, **GREEDY)


def model(checkpoints, **extra):
    return resolve_model("moshi", **checkpoints, device="cpu", threads="1", **extra)


def noise(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(seconds * 24_000))).astype(np.float32)


def schedule(m, trials, size: int):
    """Drive ``step_batch`` by hand: ``trials`` are (slot, first tick, input); returns each
    trial's (audio, words per frame)."""
    m.open_batch(size)
    ends = [start + len(x) // F for _, start, x in trials]
    got: list[list] = [[] for _ in trials]
    for t in range(max(ends)):
        frames, whose = {}, {}
        for i, (slot, start, x) in enumerate(trials):
            k = t - start
            if k == 0:
                m.start_slot(slot, SessionInfo(instance=None))
            if 0 <= k < len(x) // F:
                frames[slot], whose[slot] = x[k * F:(k + 1) * F], i
            elif k == len(x) // F:
                m.finish_slot(slot)
        for slot, out in m.step_batch(frames).items():
            got[whose[slot]].append(out)
    return [(np.concatenate([o.audio for o in outs]), [tuple(o.transcript) for o in outs])
            for outs in got]


def equal(a, b) -> bool:
    return np.array_equal(a[0], b[0]) and a[1] == b[1]


def test_each_slot_depends_only_on_its_own_input(greedy):
    m = greedy
    assert is_batched(m) and m.slots_reset_alone
    a, b, c = noise(1.2, 1), noise(0.64, 2), noise(0.48, 3)
    alone_a = schedule(m, [(0, 0, a)], 2)[0]
    alone_b = schedule(m, [(1, 3, b)], 2)[0]
    alone_c = schedule(m, [(1, 0, c)], 2)[0]
    # b starts 3 frames late; then c takes b's slot (reset alone) while a still runs
    together = schedule(m, [(0, 0, a), (1, 3, b), (1, 3 + len(b) // F, c)], 2)
    assert np.abs(alone_a[0]).max() > 0 and not np.array_equal(alone_a[0][:len(b)],
                                                               alone_b[0][:len(b)])
    assert equal(together[0], alone_a) and equal(together[1], alone_b)
    assert equal(together[2], alone_c)


def test_batch_of_one_is_the_unbatched_adapter(greedy):
    m = greedy
    x = noise(1.2, 4)
    m.start(SessionInfo(instance=None))
    outs = [m.step(x[k * F:(k + 1) * F]) for k in range(len(x) // F)]
    m.finish()
    solo = (np.concatenate([o.audio for o in outs]), [tuple(o.transcript) for o in outs])
    assert not solo[0][:2 * F].any()  # the same clock: two silent frames first
    assert equal(schedule(m, [(0, 0, x)], 1)[0], solo)


def test_a_sampled_batched_run_is_deterministic(checkpoints):
    trials = [(0, 0, noise(0.8, 5)), (1, 2, noise(0.8, 6))]
    first = schedule(model(checkpoints), trials, 2)
    again = schedule(model(checkpoints), trials, 2)
    assert all(equal(x, y) for x, y in zip(first, again))


async def short_trials(m, insts, size: int):
    """The instances' Direct Replay / barge-in as trials of one Batcher, with a 1 s
    observation period (the tiny model steps slowly on a shared CPU)."""
    batcher = Batcher(m, size)

    async def trial(inst):
        slot = await batcher.acquire()
        try:
            pipeline = (BargeInReplay(observation_s=1.0) if inst.action == "interrupt"
                        else DirectReplay(observation_s=1.0))
            return await pipeline.run(BatchedDuplex(batcher, slot, SessionInfo(inst)), inst)
        finally:
            batcher.release(slot)

    return await asyncio.gather(*(trial(i) for i in insts))


@pytest.fixture(scope="module")
def lockstep(greedy, tmp_path_factory):
    """Direct Replay and barge-in as two trials of one batch of 2 on the greedy model: run
    once for the module, read by the lockstep test and compared with the bridge's run."""
    tmp = tmp_path_factory.mktemp("lockstep")
    insts = [direct_instance(tmp, "take_turn", "delayed"),
             direct_instance(tmp, "interrupt", "help")]  # Direct Replay and barge-in
    return insts, run(short_trials(greedy, insts, 2))


def test_the_pipelines_in_lockstep(greedy, lockstep):
    insts, together = lockstep
    m = greedy
    # each alone in the slot it had (slot k: the k-th trial to take one)
    first = run(short_trials(m, insts[:1], 2))
    assert same(first[0], together[0]) and together[1].user_sent_until is not None
    assert np.abs(together[0].output).max() > 0


@pytest.mark.slow
def test_moshi_batched_behind_the_bridge_is_moshi_batched_in_process(greedy, lockstep):
    """``python -m pytest_duplexact.bridges.moshi_bridge --batch 2`` (moshi_bridge.py): the kit
    steps both trials in one call (bridges/kit.py, BatchStepper), and the client, batched too, hears what
    the adapter gives in process."""
    from pytest_duplexact.bridges.moshi_bridge import BatchedMoshiBridge
    from pytest_duplexact.models import resolve_model as resolve
    from tests.bridges.support import served

    insts, local = lockstep  # the in-process batched run (greedy: the same at every call)
    with served(BatchedMoshiBridge(greedy, 2)) as s:  # open_batch starts the model afresh
        assert s.warmup_s is not None  # both slots warmed before it listened, no state left
        through = run(short_trials(resolve("bridge", url=s.url), insts, 2))
        assert max(s.stepper.calls) == 2
    for a, b in zip(local, through):
        np.testing.assert_array_equal(a.output, b.output)
        assert [w.text for w in a.transcript] == [w.text for w in b.transcript]
