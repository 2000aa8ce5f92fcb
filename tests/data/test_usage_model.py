"""The model under test as a service in the usage totals (usage.py): what its provider
reported per session rides on Recording.usage and is charged per instance."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_duplexact.data import usage
from pytest_duplexact.models.streaming_contract import ResponseDone
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex


class _Session:
    """A streaming session that reports usage, as an adapter's session does."""

    def __init__(self):
        self.usage = {"sessions": 1, "prompt_tokens": 0, "input_audio_s": 0.0}
        self._done = asyncio.Event()

    async def send(self, pcm):
        self.usage["input_audio_s"] += len(pcm) / 16_000
        self.usage["prompt_tokens"] += 1

    async def events(self):
        yield ResponseDone()
        await self._done.wait()

    async def truncate(self, item_id, audio_end_ms):
        pass

    async def close(self):
        self._done.set()


@pytest.mark.asyncio
async def test_a_sessions_usage_lands_on_its_recording():
    d = StreamingDuplex(_Session(), input_sample_rate=16_000, output_sample_rate=24_000)
    await d.push(np.zeros(1600, np.float32))  # 100 ms in 20 ms chunks
    rec = await d.close()
    assert rec.usage == {"sessions": 1, "prompt_tokens": 5, "input_audio_s": pytest.approx(0.1)}


def test_charges_are_per_instance_and_total_across_instances():
    model = SimpleNamespace(name="live-model-1")
    harness = SimpleNamespace(model=model, model_name="live", panel=None, policy=None,
                              transcriber=None)
    assert usage.snapshot(harness) == {}  # nothing charged yet: no model service at all
    deltas = []
    for spent in ({"sessions": 2, "prompt_tokens": 100, "input_audio_s": 1.25},
                  {"sessions": 1, "prompt_tokens": 50, "input_audio_s": 0.5},
                  {}):  # a local model's trial reports nothing
        before = usage.snapshot(harness)
        usage.charge_model(harness, SimpleNamespace(usage=spent))
        deltas.append(usage.delta(usage.snapshot(harness), before))
    assert deltas[0] == {"model": {"model": "live-model-1", "sessions": 2,
                                   "prompt_tokens": 100, "input_audio_s": 1.25}}
    assert deltas[2]["model"]["sessions"] == 0
    total = usage.total(deltas)
    assert list(total) == ["model"]
    assert total["model"] == {"model": "live-model-1", "sessions": 3, "prompt_tokens": 150,
                              "input_audio_s": 1.75}
    assert usage.describe(total) == [
        "Remote services (models used, calls, cache):",
        "  model: live-model-1 (sessions 3, prompt tokens 150, input audio s 1.8)"]


def test_add_counts_sums_numbers_only():
    assert usage.add_counts({"a": 1, "b": 0.1, "flag": True, "name": "x"}, None,
                            {"a": 2, "b": 0.2}) == {"a": 3, "b": pytest.approx(0.3)}
