"""Helpers for the realtime tests (and benchmarks/realtime_concurrency.py): the fake server
modules, synthetic clips, one streamed trial and the checks every adapter's trials share,
and ``run_concurrently``, many streaming trials at once outside pytest.

(A uniquely named module rather than conftest, so test files can import it by name.)"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, NamedTuple

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.data.results import worst_lag_ms
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex, run_with_retry
from pytest_duplexact.remote.retry import STREAMING, RetryPolicy
from tests.support.servers import load_fake_server

fake = load_fake_server()
minicpm_fake = load_fake_server("minicpm_server")


def user_clip(spans: list[tuple[float, float]], total: float, hz: float = 300.0,
              amplitude: float = 0.3) -> np.ndarray:
    """16 kHz input: a tone burst ("speech") in each span, silence elsewhere. Span edges on
    20 ms boundaries make the fake server's VAD see them exactly."""
    x = np.zeros(int(round(total * SAMPLE_RATE)), np.float32)
    for start, end in spans:
        a, b = int(round(start * SAMPLE_RATE)), int(round(end * SAMPLE_RATE))
        t = np.arange(b - a) / SAMPLE_RATE
        x[a:b] = amplitude * np.sin(2 * np.pi * hz * t)
    return x


class Trial(NamedTuple):
    record: Any     # what the duplex recorded: output, transcript, events, usage
    snapshots: list[tuple[float, list]]  # (duplex time, transcript so far) after each push
    t0: float       # loop time of the client's t = 0, to put server times on its clock
    session: Any    # the adapter's session (its usage)


SETTLE_S = 30.0  # at most this much silence after a clip waiting for ``until`` (no hang)


async def run_trial(model, clip: np.ndarray, block: float = 0.1,
                    until: Callable[[StreamingDuplex], bool] | None = None) -> Trial:
    """Stream ``clip`` in ``block``-second pushes, snapshotting the transcript after each;
    with ``until``, then silence, block by block, until it holds (at most SETTLE_S, plus the
    input lateness measured, up to SETTLE_S)."""
    d = await StreamingDuplex.open(model, None)
    snapshots = []
    step = int(block * SAMPLE_RATE)
    for i in range(0, len(clip), step):
        await d.push(clip[i:i + step])
        snapshots.append((d.now, d.transcript()))
    extra = 0.0
    # a starved loop sends the input late, and the fake answers that input late: the wait
    # allows the lateness the harness measured (up to SETTLE_S more: every wait ends)
    while until is not None and not until(d) and \
            extra < SETTLE_S + min(d.max_input_lag, SETTLE_S):
        await d.push(np.zeros(step, np.float32))
        snapshots.append((d.now, d.transcript()))
        extra += block
    session = d.session
    return Trial(await d.close(), snapshots, d.started_at, session)


def on_client_clock(session, server_t: float, client_t0: float) -> float:
    """A server time (s since its first input audio) on the client's timeline: the fakes run
    in the test's event loop, so both clocks are the loop's."""
    return session.t0_monotonic + server_t - client_t0


def played_until(session) -> float:
    """When a listener would stop hearing the session's audio, on the server's clock: each
    chunk plays at 1x from when the fake actually sent it, behind what is still playing (its
    own lateness on a loaded machine included). Both fakes record ``sent`` this way."""
    end = 0.0
    for m in session.sent:
        if "audio_ms" in m:
            end = max(end, m["t"]) + m["audio_ms"] / 1000
    return end


def stall(rec) -> float:
    """The trial's largest input delay behind the wall clock (s), as the harness recorded it
    (``input_lag max``, when it exceeded a chunk): a stall of the event loop also delays
    reading the audio that arrived during it, so a timing bound holds up to this much more.
    Timing tests measure against it, so their verdict does not depend on the machine's load;
    the unloaded figures are benchmarks/harness_performance.py's."""
    lags = [float(what.split()[-1][:-2]) / 1000 for _, what in rec.events
            if what.startswith("input_lag max")]
    # the loop monitor's largest stall too: a stall shorter than a chunk leaves no input_lag
    # event, yet delays a send scheduled inside it by as much (seen in CI: 11.7 ms stall,
    # first chunk 3.6 ms past a 30 ms bound)
    lags.append(worst_lag_ms(getattr(rec, "clock", None) or {}) / 1000)
    return max(lags)


def load_allowance(rec) -> float:
    """What a timing bound allows on top of its unloaded figure for the trial's loop stall:
    the stall delays the reading of audio that arrived during it by its length, and the
    catch-up after it (the overdue input chunks sent back to back) by up to as much again.
    Zero on an idle machine, so the unloaded bound is tested there as it is."""
    return 2 * stall(rec)


def answered(server, tail_s: float = 0.0,
             session: Callable[[], Any] | None = None) -> Callable[[StreamingDuplex], bool]:
    """``run_trial``'s ``until``: the fake has finished its answers (the session's
    ``responses`` or ``turns``; its first session unless ``session`` picks one) and a listener
    has heard all of them, ``tail_s`` ago. On a loaded machine the fake answers late, so the
    trial runs on until then rather than for a fixed time (which once ended it mid-answer).
    The harness's own playback must have ended ``tail_s`` ago too: audio it received late (a
    stall of its loop) plays late, and a trial cut before that loses the last words."""
    def done(d: StreamingDuplex) -> bool:
        s = session() if session else (server.sessions[0] if server.sessions else None)
        answers = (getattr(s, "responses", None) or getattr(s, "turns", None)) if s else None
        if not answers or any(a.status == "in_progress" for a in answers):
            return False
        return on_client_clock(s, played_until(s), d.started_at) + tail_s <= d.now and \
            not d.playback.playing(d.now - tail_s)
    return done


TIMED_TEXT = "one two three four five six"
TIMING_TRIALS = [  # (user speech end s, answer after ms, speak s): the same for each adapter
    (0.60, 300, 0.50), (0.60, 450, 0.80), (0.80, 350, 1.00), (0.70, 600, 0.40),
    (0.50, 700, 0.90), (0.90, 320, 0.60), (0.60, 500, 1.10), (0.80, 400, 0.70),
    (0.70, 550, 0.80), (0.50, 380, 1.20),
]


async def run_timed_trials(server, trials: list[tuple[float, float, float]],
                           model_for: Callable, tail_s: float) -> list[tuple[Trial, Any]]:
    """The timing-accuracy trials, all at once against one fake: in trial i (tagged i) the
    user speaks from 0.2 s to ``end``, the fake answers ``answer_ms`` later with ``speak`` s
    of :data:`TIMED_TEXT`, and the clip runs ``tail_s`` past that. Each trial with the
    fake's record of its session, in trial order."""
    def played_out(tag: str) -> Callable[[StreamingDuplex], bool]:
        # the last session of this trial, as below (a retried connect opens another)
        return answered(server, tail_s,
                        lambda: next((s for s in reversed(server.sessions)
                                      if s.script.tag == tag), None))

    async def trial(i, end, answer_ms, speak):
        script = {"answer_after_ms": answer_ms, "speak_s": speak, "tag": str(i),
                  "text": TIMED_TEXT, "pace": 4.0}
        clip = user_clip([(0.2, end)], total=end + answer_ms / 1000 + speak + tail_s)
        return await run_trial(model_for(server, script), clip, until=played_out(str(i)))

    results = await asyncio.gather(*(trial(i, *t) for i, t in enumerate(trials)))
    sessions = {s.script.tag: s for s in server.sessions}
    return [(result, sessions[str(i)]) for i, result in enumerate(results)]


def assert_transcript_never_ahead(rec, snapshots, text: str = TIMED_TEXT) -> None:
    """The native transcript is the spoken text, and no snapshot ever showed a word before it
    had finished playing, or one that the final transcript does not have."""
    assert [w.text for w in rec.transcript] == text.split()
    final = set(rec.transcript)
    for now, words in snapshots:
        assert all(w.end <= now and w in final for w in words)


def assert_transcript_cut_at(rec, offset: float, text: str) -> None:
    """After a barge-in: only words that finished playing before the cut (``offset``, +5 ms
    for the energy frames) are in the transcript, so fewer than the reply had."""
    assert rec.transcript and all(w.end <= offset + 0.005 for w in rec.transcript)
    assert len(rec.transcript) < len(text.split())


async def assert_dropped_mid_instance(model, error: type[ModelError], match: str,
                                      total: float = 1.0) -> None:
    """A connection the fake drops while the user speaks fails that push with ``error``, and
    the close too: never a trial that quietly ends early."""
    d = await StreamingDuplex.open(model, None)
    with pytest.raises(error, match=match):
        await d.push(user_clip([(0.1, 0.4)], total=total))
    with pytest.raises(ModelError):
        await d.close()


def event_kinds(rec) -> list[str]:
    """The first word of each recorded event (``speech_started``, ``truncate``, ...)."""
    return [what.split()[0] for _, what in rec.events]


async def run_concurrently(jobs: Iterable[Callable[[], Awaitable[Any]]], concurrency: int,
                           policy: RetryPolicy = STREAMING) -> list:
    """Run every job with at most ``concurrency`` at once; results in job order.

    A job that fails with ``ModelError`` (after its retries) yields that error in its place,
    so one broken instance never sinks the others; any other exception is a bug and
    propagates (cancelling the rest)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    jobs = list(jobs)
    results: list[Any] = [None] * len(jobs)

    async def run(i: int, job: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            try:
                results[i] = await run_with_retry(job, policy)
            except ModelError as e:
                results[i] = e

    try:
        async with asyncio.TaskGroup() as tg:
            for i, job in enumerate(jobs):
                tg.create_task(run(i, job))
    except BaseExceptionGroup as group:  # surface the bug itself, not a wrapper
        raise group.exceptions[0]
    return results
