"""A session with ``send_nowait``: the send clock sends its chunks itself (pacing.py), so the
pushing task wakes once per push, not per chunk. The chunks, their order and their instants
must be exactly the task path's; a chunk the session declines goes through ``send`` in order;
a failure or a cancelled push stops the chunks after it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.models.util.pcm import pcm16_array
from pytest_duplexact.pipelines.direct import push_in_chunks
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.pipelines.test_streaming_duplex import (
    MemorySession,
    assert_caught_up_between_turns,
    overdue_sends,
)

RATE = 24_000  # resampled: the pieces' boundaries come from the resampler's arithmetic


class NowaitSession(MemorySession):
    """``send_nowait`` takes each chunk unless told to decline its index or to raise."""

    def __init__(self, decline=(), raise_at=None, error=None):
        super().__init__()
        self.pieces: list[tuple[str, np.ndarray]] = []
        self.decline = set(decline)
        self.raise_at, self.error = raise_at, error
        self.offered = 0

    def send_nowait(self, pcm):
        i, self.offered = self.offered, self.offered + 1
        if i == self.raise_at:
            raise self.error
        if i in self.decline:
            return False
        self.pieces.append(("nowait", np.array(pcm)))
        self.sends.append((asyncio.get_running_loop().time(), len(pcm)))
        return True

    async def send(self, pcm):
        self.pieces.append(("send", np.array(pcm)))
        await super().send(pcm)


class PlainSession(MemorySession):
    def __init__(self):
        super().__init__()
        self.pieces: list[tuple[str, np.ndarray]] = []

    async def send(self, pcm):
        self.pieces.append(("send", np.array(pcm)))
        await super().send(pcm)


def signal(seconds: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * SAMPLE_RATE)) * 0.1
            ).astype(np.float32)


async def stream(session, pushes: list[np.ndarray]) -> StreamingDuplex:
    d = StreamingDuplex(session, input_sample_rate=RATE, output_sample_rate=RATE)
    for x in pushes:
        await d.push(x)
    await d.close()
    return d


def joined(pieces) -> np.ndarray:
    return np.concatenate([p for _, p in pieces])


@pytest.mark.asyncio
async def test_the_clock_sends_the_task_paths_chunks_at_their_slots():
    pushes = [signal(0.13, 1), signal(0.3, 2), signal(0.05, 3)]  # uneven: not whole chunks
    plain, clocked = PlainSession(), NowaitSession()
    await stream(plain, pushes)
    d = await stream(clocked, pushes)
    assert [k for k, _ in clocked.pieces] == ["nowait"] * len(plain.pieces)
    for (_, a), (_, b) in zip(plain.pieces, clocked.pieces):
        np.testing.assert_array_equal(a, b)
    # each chunk at or after its absolute slot (t0 + k / 16 kHz), never before
    slots, base = [], 0
    for x in pushes:
        slots += [base + i for i in range(0, len(x), d.chunk)]
        base += len(x)
    assert len(clocked.sends) == len(slots)
    for (at, _), k in zip(clocked.sends, slots):
        assert at >= d.started_at + k / SAMPLE_RATE - 1e-6
    assert d.now == pytest.approx(sum(len(x) for x in pushes) / SAMPLE_RATE)


@pytest.mark.asyncio
async def test_a_declined_chunk_goes_through_send_in_order_and_the_clock_resumes():
    pushes = [signal(0.2, 4)]
    plain, clocked = PlainSession(), NowaitSession(decline={0, 3, 4})
    await stream(plain, pushes)
    await stream(clocked, pushes)
    kinds = [k for k, _ in clocked.pieces]
    assert kinds == ["send", "nowait", "nowait", "send", "send"] + \
        ["nowait"] * (len(plain.pieces) - 5)
    np.testing.assert_array_equal(joined(clocked.pieces), joined(plain.pieces))


@pytest.mark.asyncio
@pytest.mark.parametrize("error, expected", [
    (OSError("broken pipe"), "sending input failed: OSError: broken pipe"),
    (TransientModelError("the connection closed mid-instance"),
     "the connection closed mid-instance"),
])
async def test_a_send_that_fails_on_the_clock_fails_the_push(error, expected):
    session = NowaitSession(raise_at=2, error=error)
    d = StreamingDuplex(session, input_sample_rate=RATE, output_sample_rate=RATE)
    with pytest.raises(ModelError, match=expected) as caught:
        await d.push(signal(0.2))
    assert isinstance(caught.value, TransientModelError)
    assert session.offered == 3 and len(session.pieces) == 2  # nothing after the failure
    assert d.now == pytest.approx(2 * d.chunk / SAMPLE_RATE)
    with pytest.raises(ModelError):  # the trial stays failed
        await d.push(signal(0.02))


@pytest.mark.asyncio
async def test_a_cancelled_push_sends_nothing_more():
    session = NowaitSession()
    d = StreamingDuplex(session, input_sample_rate=RATE, output_sample_rate=RATE)
    task = asyncio.create_task(d.push(signal(1.0)))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the registry holds no callback of the cancelled push (nor keeps its duplex alive)
    assert all(isinstance(w, asyncio.Future) for ws in d._pacer._waiters.values() for w in ws)
    sent = len(session.pieces)
    assert 0 < sent < 50
    await asyncio.sleep(0.1)  # five more slots pass
    assert len(session.pieces) == sent


@pytest.mark.asyncio
async def test_overdue_chunks_on_the_clock_still_let_the_loop_run_between_them():
    def open_duplex(sent):
        session = NowaitSession()
        real = session.send_nowait
        session.send_nowait = lambda pcm: sent() or real(pcm)
        return StreamingDuplex(session, input_sample_rate=RATE, output_sample_rate=RATE)

    assert_caught_up_between_turns(*await overdue_sends(open_duplex))


@pytest.mark.asyncio
async def test_a_pcm16_session_gets_its_chunks_converted_once_per_push():
    class Pcm16(NowaitSession):
        input_pcm16 = True

    pushes = [signal(0.13, 5), signal(0.2, 6)]
    plain, wire = PlainSession(), Pcm16(decline={1})
    await stream(plain, pushes)
    await stream(wire, pushes)
    assert all(p.dtype == np.int16 for _, p in wire.pieces)
    assert [len(p) for _, p in wire.pieces] == [len(p) for _, p in plain.pieces]
    np.testing.assert_array_equal(joined(wire.pieces), pcm16_array(joined(plain.pieces)))


@pytest.mark.asyncio
async def test_a_stretch_with_no_decision_is_one_push_on_the_wall_clock():
    session = NowaitSession()
    d = StreamingDuplex(session, input_sample_rate=RATE, output_sample_rate=RATE)
    pushes: list[int] = []
    real = d.push

    async def push(x):
        pushes.append(len(x))
        await real(x)

    d.push = push
    x = signal(0.3, 7)
    await push_in_chunks(d, x)  # nothing decided along the way: one push
    seen: list[int] = []
    await push_in_chunks(d, x, after_each=lambda: seen.append(1))  # 40 ms pushes
    await d.close()
    assert pushes[0] == len(x) and len(pushes) == 1 + len(seen) and len(seen) == 8


@pytest.mark.asyncio
async def test_a_wrapper_or_a_subclass_with_its_own_send_sees_every_chunk_as_floats():
    """The fast path is the session's own: a wrapper that forwards attributes, or a subclass
    that overrides ``send``, is not bypassed (nor handed int16), and a mock's invented
    attributes are no fast path."""
    from unittest.mock import MagicMock

    class Pcm16(NowaitSession):
        input_pcm16 = True

    class Recorder:
        def __init__(self, inner):
            self.inner, self.seen = inner, []

        async def send(self, pcm):
            self.seen.append(np.array(pcm))
            await self.inner.send(pcm)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    class Gained(Pcm16):
        async def send(self, pcm):
            self.pieces.append(("gained", np.array(pcm)))

    x = signal(0.1, 8)
    wrapper = Recorder(Pcm16())
    await stream(wrapper, [x])
    assert wrapper.seen and all(p.dtype == np.float32 for p in wrapper.seen)
    assert wrapper.inner.offered == 0  # its send_nowait was never used past the wrapper
    gained = Gained()
    await stream(gained, [x])
    assert {k for k, _ in gained.pieces} == {"gained"} and gained.offered == 0
    assert all(p.dtype == np.float32 for _, p in gained.pieces)
    mock = MagicMock()
    d = StreamingDuplex(mock, input_sample_rate=RATE, output_sample_rate=RATE)
    assert d._send_nowait is None and d._pcm16 is False
