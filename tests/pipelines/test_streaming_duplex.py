"""StreamingDuplex on the wall clock, against an in-memory session (no network)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.streaming_contract import (
    AudioDelta,
    ResponseDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from pytest_duplexact.remote.retry import RetryPolicy
from tests.support.realtime import run_concurrently, stall

OUT_RATE = 24_000


class MemorySession:
    """Records every send with its loop time; plays back scripted events on demand."""

    def __init__(self):
        self.sends: list[tuple[float, int]] = []
        self.truncates: list[tuple[str, int]] = []
        self.queue: asyncio.Queue = asyncio.Queue()
        self.closed = False

    async def send(self, pcm):
        self.sends.append((asyncio.get_running_loop().time(), len(pcm)))

    async def events(self):
        while True:
            ev = await self.queue.get()
            if ev is None:
                return
            if isinstance(ev, Exception):
                raise ev
            yield ev

    async def truncate(self, item_id, audio_end_ms):
        self.truncates.append((item_id, audio_end_ms))

    async def close(self):
        self.closed = True


class LoopStalls:
    """The largest delay of a 5 ms heartbeat on this event loop while the block runs: what
    the machine's load added to the loop's timers, measured beside the code under test (a
    relative schedule's drift is many small delays, which a heartbeat does not see)."""

    async def __aenter__(self):
        self.max = 0.0
        self._task = asyncio.create_task(self._beat())
        return self

    async def _beat(self):
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.005)
            self.max = max(self.max, loop.time() - t - 0.005)

    async def __aexit__(self, *exc):
        self._task.cancel()


def duplex(session, chunk_ms=20):
    return StreamingDuplex(session, input_sample_rate=OUT_RATE, output_sample_rate=OUT_RATE,
                           chunk_ms=chunk_ms)


@pytest.mark.asyncio
async def test_input_goes_out_on_an_absolute_schedule_without_drift():
    session = MemorySession()
    d = duplex(session)
    loop = asyncio.get_running_loop()
    async with LoopStalls() as stalls:
        start = loop.time()
        for _ in range(7):  # uneven pushes: 130 ms each, not a multiple of the chunk
            await d.push(np.zeros(int(0.13 * SAMPLE_RATE), np.float32))
        elapsed = loop.time() - start
    rec = await d.close()
    assert d.now == pytest.approx(0.91)
    # push returns when the audio is consumed: never sooner, later only by the loop's stalls
    assert 0.91 - 0.05 <= elapsed <= 0.91 + 0.05 + stalls.max, (elapsed, stalls.max)
    push = int(0.13 * SAMPLE_RATE)
    slots = [p * push + m for p in range(7) for m in range(0, push, d.chunk)]
    assert len(session.sends) == len(slots)
    t0 = d.started_at  # the first sample's slot (the send clock's grid line)
    late = []
    for (at, _), k in zip(session.sends, slots):
        due = t0 + k / SAMPLE_RATE
        assert at >= due - 1e-3, "a chunk went out early"
        late.append(at - due)
    # each chunk is due at its absolute slot, so a stall (a busy machine) is caught up and
    # never carried forward: typical lateness stays at the loop's timer resolution, plus what
    # the heartbeat saw the load add to any timer
    bound = 0.005 + stalls.max
    assert np.median(late) < bound and np.median(late[-10:]) < bound, (np.round(late, 3),
                                                                      stalls.max)
    # exact resampling: everything but the filter's 4 ms lookahead has gone out
    lookahead = int(round(d._resampler.lag * OUT_RATE / SAMPLE_RATE))
    assert sum(n for _, n in session.sends) == int(round(0.91 * OUT_RATE)) - lookahead
    assert len(rec.input) == len(rec.output) == int(round(0.91 * SAMPLE_RATE))
    assert session.closed


async def overdue_sends(open_duplex) -> tuple[list[int], StreamingDuplex]:
    """A push whose 0.1 s is already overdue (the loop stalled 0.15 s after t = 0) while
    another task counts the loop's turns. ``open_duplex(sent)`` makes the duplex, its
    session calling ``sent()`` at each chunk it sends; returns the count at each send."""
    ticks, seen = [0], []

    async def other_session():
        while True:
            await asyncio.sleep(0)
            ticks[0] += 1

    d = open_duplex(lambda: seen.append(ticks[0]))
    await d.push(np.zeros(320, np.float32))  # t = 0
    other = asyncio.create_task(other_session())
    time.sleep(0.15)  # the loop stalls: the next 0.1 s of input is overdue when pushed
    await d.push(np.zeros(1600, np.float32))
    other.cancel()
    await d.close()
    return seen, d


def assert_caught_up_between_turns(seen: list[int], d: StreamingDuplex) -> None:
    late = seen[1:6]  # the five chunks of the overdue push
    assert len(late) == 5 and all(b > a for a, b in zip(late, late[1:])), seen
    assert d.max_input_lag >= 0.05


@pytest.mark.asyncio
async def test_a_late_push_catches_up_without_holding_the_loop():
    """Chunks already overdue (a stall) go out back to back, yet the loop runs other tasks
    between them: held, a catch-up starved every other session in the loop (and the tests'
    fakes) for as long as it lasted."""

    def open_duplex(sent):
        session = MemorySession()

        async def send(pcm):  # a send that never suspends (a socket with room in its buffer)
            sent()

        session.send = send
        return duplex(session)

    assert_caught_up_between_turns(*await overdue_sends(open_duplex))


@pytest.mark.asyncio
async def test_output_is_heard_from_its_arrival_and_barge_in_truncates():
    session = MemorySession()
    d = duplex(session)
    await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(OUT_RATE) / OUT_RATE).astype(np.float32)
    session.queue.put_nowait(TranscriptDelta("it1", "hello there"))
    session.queue.put_nowait(AudioDelta("it1", tone))  # 1 s of audio, arrives at once
    await d.push(np.zeros(int(0.3 * SAMPLE_RATE), np.float32))
    session.queue.put_nowait(SpeechStarted())  # at ~0.5 s: 0.3 s played
    await d.push(np.zeros(int(0.5 * SAMPLE_RATE), np.float32))
    rec = await d.close()
    assert len(session.truncates) == 1
    item, played_ms = session.truncates[0]
    # when the duplex read the events, up to the lag it recorded on a loaded machine: the
    # input's, the events' and the loop monitor's stalls (one shorter than a chunk delays the
    # reading of SpeechStarted too, yet leaves the input on time)
    late = stall(rec)
    assert item == "it1" and abs(played_ms - 300) <= 25 + 1000 * late, (played_ms, late)
    loud = np.flatnonzero(np.abs(rec.output) > 0.05) / SAMPLE_RATE
    assert abs(loud[0] - 0.2) <= 0.02 + late
    assert loud[-1] - loud[0] == pytest.approx(played_ms / 1000, abs=0.003)
    events = [what for _, what in rec.events]
    assert events[:2] == ["speech_started", f"truncate it1 {played_ms}ms"]
    assert rec.transcript == ()  # "hello" ends at 0.45 s of the item: never played


@pytest.mark.asyncio
async def test_a_session_that_ends_mid_instance_is_a_model_error():
    session = MemorySession()
    d = duplex(session)
    await d.push(np.zeros(1600, np.float32))
    session.queue.put_nowait(None)  # the provider hung up
    with pytest.raises(TransientModelError, match="ended mid-instance"):
        await d.push(np.zeros(8000, np.float32))
    with pytest.raises(ModelError):
        await d.close()


@pytest.mark.asyncio
async def test_transcript_only_shows_what_has_played():
    session = MemorySession()
    d = duplex(session)
    await d.push(np.zeros(1600, np.float32))
    session.queue.put_nowait(TranscriptDelta("a", "one two"))
    session.queue.put_nowait(AudioDelta("a", np.full(int(0.7 * OUT_RATE), 0.2, np.float32)))
    session.queue.put_nowait(ResponseDone())
    await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))  # now 0.3: 0.2 s played
    assert d.transcript() == []
    await d.push(np.zeros(int(0.3 * SAMPLE_RATE), np.float32))  # 0.6: "one" (0.3 s) done
    assert [w.text for w in d.transcript()] == ["one"]
    await d.push(np.zeros(int(0.4 * SAMPLE_RATE), np.float32))
    assert [w.text for w in d.transcript()] == ["one", "two"]
    rec = await d.close()
    assert [w.text for w in rec.transcript] == ["one", "two"]
    assert all(w.end <= rec.duration for w in rec.transcript)


# --- run_concurrently --------------------------------------------------------------------

@pytest.mark.asyncio
async def test_run_concurrently_bounds_the_pool_and_keeps_order():
    running = peak = 0

    def job(i):
        async def run():
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            return i
        return run

    assert await run_concurrently([job(i) for i in range(10)], 3) == list(range(10))
    assert peak == 3


@pytest.mark.asyncio
async def test_run_concurrently_retries_transient_failures_from_scratch():
    attempts = {"flaky": 0, "dead": 0, "broken": 0}

    async def flaky():
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise TransientModelError("HTTP 429")
        return "ok"

    async def dead():
        attempts["dead"] += 1
        raise TransientModelError("connection dropped")

    async def broken():
        attempts["broken"] += 1
        raise ModelError("bad request")  # final: not retried

    policy = RetryPolicy(max_attempts=3, backoff_base=0.001, jitter=True)
    results = await run_concurrently([flaky, dead, broken], 2, policy)
    assert results[0] == "ok"
    assert isinstance(results[1], ModelError) and "gave up after 3 attempts" in str(results[1])
    assert isinstance(results[2], ModelError) and attempts["broken"] == 1
    assert attempts == {"flaky": 3, "dead": 3, "broken": 1}


@pytest.mark.asyncio
async def test_run_concurrently_lets_bugs_through():
    async def bug():
        raise KeyError("not a model failure")

    with pytest.raises(KeyError):
        await run_concurrently([bug], 1)


@pytest.mark.asyncio
async def test_stop_playback_is_a_client_side_barge_in():
    session = MemorySession()
    d = duplex(session)
    await d.push(np.zeros(1600, np.float32))
    session.queue.put_nowait(AudioDelta("a", np.full(OUT_RATE, 0.2, np.float32)))
    await d.push(np.zeros(3200, np.float32))  # 0.2 s of it played
    await d.stop_playback()
    await d.push(np.zeros(3200, np.float32))
    rec = await d.close()
    [(item, played_ms)] = session.truncates
    late = stall(rec)  # a loaded machine: stop_playback ran up to that much later
    assert item == "a" and abs(played_ms - 200) <= 15 + 1000 * late, (played_ms, late)
    heard = np.flatnonzero(np.abs(rec.output) > 0.1) / SAMPLE_RATE
    assert heard[-1] - heard[0] == pytest.approx(played_ms / 1000, abs=0.005)


@pytest.mark.asyncio
async def test_clips_are_read_and_resampled_off_the_loop_thread_with_the_same_output(
        monkeypatch):
    """A clip's decode and its resampling ahead run in a worker thread (they take
    milliseconds, during which the loop would pace no other session), and the pushes then
    carry what ``expect`` on the loop's thread would have made."""
    import threading

    from pytest_duplexact.pipelines.direct import prepare, read_clip

    loop_thread = threading.get_ident()
    clip = (0.2 * np.sin(np.arange(SAMPLE_RATE // 5) / 7)).astype(np.float32)

    class Clip:
        def load(self):
            self.thread = threading.get_ident()
            return clip

    from pytest_duplexact.pipelines import streaming_duplex

    threads = []

    def resample(*args):
        threads.append(threading.get_ident())
        return real(*args)

    real = streaming_duplex.resample
    monkeypatch.setattr(streaming_duplex, "resample", resample)
    c = Clip()
    on_loop, off_loop = MemorySession(), MemorySession()
    sent = {id(on_loop): [], id(off_loop): []}
    for s in (on_loop, off_loop):
        async def send(pcm, s=s):
            sent[id(s)].append(np.array(pcm))
        s.send = send
    a, b = duplex(on_loop), duplex(off_loop)
    assert np.array_equal(await read_clip(b, c), clip) and c.thread != loop_thread
    a.expect(clip)
    await prepare(b, clip)
    assert threads[0] == loop_thread and threads[1] != loop_thread  # expect's, prepare's
    for i in range(0, len(clip), 640):
        await a.push(clip[i: i + 640])
        await b.push(clip[i: i + 640])
    await a.close(), await b.close()
    assert len(sent[id(on_loop)]) == len(sent[id(off_loop)]) > 0
    assert all(np.array_equal(x, y) for x, y in zip(sent[id(on_loop)], sent[id(off_loop)]))
