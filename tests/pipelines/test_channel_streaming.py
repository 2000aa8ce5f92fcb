"""The echo channel on a streaming session (pipelines/channelled.py): what the model hears is
its own played output, from the heard track, at the requested delay; what was due before it
was heard echoes as silence and is recorded as the trial's playback error."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.models.streaming_contract import AudioDelta
from pytest_duplexact.pipelines import channel as ch
from pytest_duplexact.pipelines.channelled import ChannelledDuplex
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.pipelines.helpers import direct_instance
from tests.pipelines.test_streaming_duplex import MemorySession


@pytest.mark.asyncio
@pytest.mark.parametrize("delay_ms", [60, 25])
async def test_streaming_echo_lands_at_its_delay_within_the_playback_error(tmp_path, delay_ms):
    inst = direct_instance(tmp_path, "take_turn", "delayed")
    session = MemorySession()
    inner = StreamingDuplex(session, input_sample_rate=SAMPLE_RATE,
                            output_sample_rate=SAMPLE_RATE, chunk_ms=20)
    d = ChannelledDuplex(inner, ch.parse(f"echo:-6@{delay_ms}"), SessionInfo(inst))
    rng = np.random.default_rng(1)
    await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
    session.queue.put_nowait(AudioDelta("a", (0.1 * rng.standard_normal(int(0.3 * SAMPLE_RATE)))
                                        .astype(np.float32)))
    for _ in range(15):  # the pipelines' 40 ms pushes
        await d.push(np.zeros(640, np.float32))
    rec = await d.close()
    assert not rec.input.any()  # the clean user track: silence
    out, heard = rec.output.astype(np.float64), rec.channel_input.astype(np.float64)
    k = int(round(delay_ms * SAMPLE_RATE / 1000))
    expect = np.zeros_like(out)
    expect[k:] = 10 ** (-6 / 20) * out[:-k]
    missing = np.flatnonzero(np.abs(heard - expect) > 1e-4)
    notes = [w for _, w in rec.events if w.startswith("echo:")]
    if missing.size:  # only what the trial recorded as not heard in time, and said so
        (note,) = notes
        error = float(re.search(r"up to ([\d.]+) ms", note)[1]) * SAMPLE_RATE / 1000
        assert missing.size <= error + 1 and not heard[missing].any()
    # and what was heard in time is there: correlating it with what was played finds the lag
    lags = np.arange(0, 2 * k + 1)
    score = [np.dot(heard[lag:], out[: len(out) - lag]) for lag in lags]
    assert np.count_nonzero(heard) > 0 and int(lags[int(np.argmax(score))]) == k


@pytest.mark.asyncio
async def test_a_channel_reads_clips_the_inner_duplexs_way_or_in_place(tmp_path):
    """A channelled trial reads its clips as its inner duplex does: a wall-clock one off the
    loop's thread, a duplex-like object of a user's factory (no ``read_clip``) in place."""
    import threading

    inst = direct_instance(tmp_path, "take_turn", "delayed")
    clip = inst.clip("user")
    streaming = StreamingDuplex(MemorySession(), input_sample_rate=SAMPLE_RATE,
                                output_sample_rate=SAMPLE_RATE, chunk_ms=20)

    class DuplexLike:  # what open_duplex accepts from a factory: no Duplex base
        free_running = False

    threads = []

    class Spy:
        def load(self):
            threads.append(threading.get_ident())
            return clip.load()

    for inner in (streaming, DuplexLike()):
        d = ChannelledDuplex(inner, ch.parse("noise:white@20"), SessionInfo(inst))
        assert np.array_equal(await d.read_clip(Spy()), clip.load())
    loop_thread = threading.get_ident()
    assert threads[0] != loop_thread and threads[1] == loop_thread
    await streaming.close()
