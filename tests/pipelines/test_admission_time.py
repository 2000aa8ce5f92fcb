"""Time a trial waits to be admitted by a busy server is not the model's time: the watchdog
(``--duplexact-timeout``) does not count it as silence, the adapter's own deadline
(``ready_timeout``, ``queue_timeout``) bounds it, and the trial's ``clock`` reports it apart
(``admission_ms``). Before: behind Raon's gateway with one worker and two trials, the second
ended "ModelTimeout: the model did not answer for 60 s" while the first ran."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.models.streaming_contract import admitting
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from pytest_duplexact.pipelines.watchdog import ModelTimeout, run_watched, watch_async
from tests.fakes.raon_gateway import FakeRaonGateway, Script

TIMEOUT = 0.4  # the watchdog's deadline in these tests; every wait below is longer


async def a_short_trial(model) -> object:
    duplex = await StreamingDuplex.open(model, SessionInfo(instance=None, seed=1))
    await duplex.push(np.zeros(1_600, np.float32))
    return await duplex.close()


def test_a_trial_queued_behind_a_one_worker_gateway_is_not_timed_out_and_says_how_long():
    async def main():
        async with FakeRaonGateway(Script(), capacity=1) as gw:
            model = resolve_model("raon-speechchat", url=gw.url, ready_timeout="30")
            first = await model.connect(SessionInfo(instance=None, seed=1))
            second = asyncio.ensure_future(watch_async(lambda: a_short_trial(model),
                                                       timeout=TIMEOUT, what="instance 2"))
            while gw.rejected < 2:  # queued: refused "no workers available", waiting it out
                await asyncio.sleep(0.05)
            await asyncio.sleep(3 * TIMEOUT)  # longer than the watchdog's deadline
            assert not second.done()
            await first.close()
            return await second, gw

    recording, gw = asyncio.run(main())
    assert recording.clock["admission_ms"] >= 3 * TIMEOUT * 1000, recording.clock
    assert gw.most_at_once == 1


class Queued:
    """A streaming model whose server keeps each trial waiting ``wait_s`` to be admitted,
    then answers nothing at all (so only admission time is in question)."""

    input_sample_rate = output_sample_rate = 16_000

    def __init__(self, wait_s: float, silent_s: float = 0.0):
        self.wait_s, self.silent_s = wait_s, silent_s

    async def connect(self, info):
        with admitting():
            await asyncio.sleep(self.wait_s)
        await asyncio.sleep(self.silent_s)  # after admission: the model's own silence
        return Silent()


class Silent:
    async def send(self, pcm):
        pass

    async def events(self):
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def truncate(self, item_id, audio_end_ms):
        pass

    async def close(self):
        pass


def test_a_serial_trial_waiting_in_a_queue_is_reported_apart_not_timed_out():
    recording = run_watched(lambda: a_short_trial(Queued(wait_s=3 * TIMEOUT)), timeout=TIMEOUT,
                            what="instance 1")
    assert recording.clock["admission_ms"] >= 3 * TIMEOUT * 1000


def test_silence_after_admission_is_still_the_models_and_timed_out():
    with pytest.raises(ModelTimeout, match="did not answer for 0.4 s"):
        run_watched(lambda: a_short_trial(Queued(wait_s=0.1, silent_s=30)), timeout=TIMEOUT,
                    what="instance 1")


def test_no_admission_no_field():
    recording = run_watched(lambda: a_short_trial(Queued(wait_s=0.0)), timeout=5,
                            what="instance 1")
    assert "admission_ms" not in recording.clock
