"""vllm-omni against a hostile server: a key written with JSON escapes in the fields the
adapter reads, a probe held by chatter, messages that are not the protocol, absurd rates,
floods and messages past the size bound. The real adapter code, over a fake socket (below
the wall clock) or a raw WebSocket server on 127.0.0.1 (tests/fakes/hostile_ws.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_duplexact.bridges import wire
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers import vllm_omni
from pytest_duplexact.models.providers.vllm_omni import (
    Deployment,
    VllmOmni,
    VllmOmniSession,
    factory,
)
from pytest_duplexact.models.streaming_contract import Error, Note, TransientModelError
from pytest_duplexact.pipelines.clock import Lateness, LoopMonitor
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.fakes.hostile_ws import HostileWS, Inbox, chatter, hold, read_json

KEY = "sk-hostile-0123456789abcdef"
CAPS = {"implementation_level": "model_native_duplex", "supports_input_append": True,
        "supports_barge_in": True, "chunk_period_ms": 1000}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("VLLM_OMNI_API_KEY", KEY)


def escaped(text: str) -> str:
    """``text`` as a hostile server writes it in JSON: every character a \\u escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def session(raws, url="ws://127.0.0.1:9/v1/realtime?duplex=1") -> VllmOmniSession:
    m = VllmOmni(url=url)
    object.__setattr__(m, "deployment", Deployment("m", dict(CAPS), 16_000, 24_000, "pcm16"))
    s = VllmOmniSession(Inbox(raws), m)
    s.deployment = m.deployment
    s._speaking = "resp_1"
    return s


async def translated(s: VllmOmniSession, n: int):
    out = []
    for _ in range(n):
        out += s.translate(await s._recv())
    return out


# --- 41.1: what was parsed is scrubbed ---------------------------------------------------------

ECHOING = [
    '{"type": "overlap.decision", "action": "listen", "reason": "%s", "policy": "x"}',
    '{"type": "response.done", "response_id": "resp_1", "response": {"id": "resp_1", '
    '"status": "cancelled", "status_details": {"reason": "%s"}}}',
    '{"type": "response.done", "response_id": "resp_1", "response": {"id": "resp_1", '
    '"status": "failed", "status_details": {"reason": "%s"}}}',
    '{"type": "session.expired", "reason": "%s"}',
    '{"type": "session.closed", "reason": "%s"}',
    '{"type": "error", "error": {"code": "x", "message": "%s"}}',
]


@pytest.mark.parametrize("template", ECHOING)
@pytest.mark.parametrize("form", ["escaped", "half-escaped", "as text"])
def test_a_key_echoed_in_any_field_the_adapter_reads_is_masked(template, form):
    said = {"escaped": escaped(f"Bearer {KEY}"), "as text": f"token={KEY}",
            "half-escaped": KEY[:5] + escaped(KEY[5:])}[form]
    events = asyncio.run(translated(session([template % said]), 1))
    texts = [e.text if isinstance(e, Note) else e.message for e in events
             if isinstance(e, (Note, Error))]
    assert texts and all(KEY not in t and KEY[5:] not in t for t in texts), texts
    assert "<VLLM_OMNI_API_KEY>" in " ".join(texts) or "<masked>" in " ".join(texts)


def test_the_streaming_duplex_scrubs_every_note_and_error_of_any_adapter():
    """The second line of defence, for adapters whose library parses (gemini-live): what an
    adapter hands over as a Note or an Error is scrubbed where the duplex records it."""

    class Leaky:  # an adapter that forgot to scrub
        async def send(self, pcm):
            pass

        async def events(self):
            yield Note(f"decision ({KEY})")
            yield Error(f"failed: {KEY}", code="x", fatal=True)

        async def truncate(self, item_id, audio_end_ms):
            pass

        async def close(self):
            pass

    async def main():
        d = StreamingDuplex(Leaky(), input_sample_rate=16_000, output_sample_rate=24_000)
        await asyncio.sleep(0.05)
        failure = d._failure
        with pytest.raises(ModelError):
            await d.close()
        return d.events, failure

    events, failure = asyncio.run(main())
    assert not any(KEY in what for _, what in events), events
    assert failure is not None and KEY not in str(failure)


# --- 41.4 / 41.14: the probe gives up, and says what answered ------------------------------------

def within(seconds: float, lateness: Lateness) -> float:
    """A wall-clock bound plus what the machine's load measured on the test's loop (twice the
    largest stall: the stall itself, and the catch-up behind it)."""
    return seconds + 2 * lateness.stall


def probe_against(handler, **options):
    async def main():
        lateness = Lateness()
        LoopMonitor.of().watch(lateness)
        try:
            async with HostileWS(handler) as server:
                t0 = time.monotonic()
                with pytest.raises(ModelConfigError) as e:
                    await asyncio.wait_for(asyncio.to_thread(
                        factory, url=server.url + "/v1/realtime?duplex=1", **options), 60)
                return str(e.value), time.monotonic() - t0, lateness
        finally:
            LoopMonitor.of().unwatch(lateness)

    return asyncio.run(main())


def test_a_probe_a_chattering_server_never_answers_gives_up_within_its_deadlines():
    text, took, lateness = probe_against(chatter(0.2), connect_timeout="1", close_timeout="1")
    assert text.startswith("vllm-omni: no session.created from ws://127.0.0.1:") \
        and "within 1 s (connect_timeout)" in text and "\n" not in text
    assert took < within(1 + 1 + 1.0, lateness), took  # session.created + session.closed


async def created_then_ignores_close(ws):
    await read_json(ws)
    await ws.send(json.dumps({"type": "session.created", "session": {
        "model": "m", "capabilities": CAPS}}))
    while True:
        await ws.send('{"type": "rate_limits.updated"}')
        await asyncio.sleep(0.2)


def test_a_probe_whose_session_close_is_ignored_gives_up_within_close_timeout():
    async def main():
        lateness = Lateness()
        LoopMonitor.of().watch(lateness)
        async with HostileWS(created_then_ignores_close) as server:
            t0 = time.monotonic()
            m = await asyncio.wait_for(asyncio.to_thread(
                factory, url=server.url, connect_timeout="2", close_timeout="1"), 60)
            took = time.monotonic() - t0
        LoopMonitor.of().unwatch(lateness)
        return m, took, lateness

    m, took, lateness = asyncio.run(main())
    assert m.deployment.model == "m"
    assert took < within(1 + 1.0, lateness), took


def answering(*messages):
    async def handler(ws):
        await read_json(ws)
        for message in messages:
            await ws.send(message)
        await hold(ws)

    return handler


@pytest.mark.parametrize("message, says", [
    ("[1, 2]", "the server sent a JSON list where an event object was expected"),
    ('"session.created"', "the server sent a JSON str where an event object was expected"),
    ("not json at all", "the server sent not JSON (Expecting value)"),
    (b"\x00READY", "the server sent a binary message (6 bytes) where JSON text was expected"),
    ("[" * 100_000, "the server sent JSON nested deeper than the parser takes"),
], ids=["list", "string", "not-json", "binary", "nested"])
def test_a_probe_answered_outside_the_protocol_says_so_in_one_line(message, says):
    text, _, _ = probe_against(answering(message), connect_timeout="5", close_timeout="0.2")
    assert text.startswith(f"vllm-omni: {says}: it does not speak vllm-omni's protocol"), text
    assert "\n" not in text


# --- 41.8: bounds --------------------------------------------------------------------------------

@pytest.mark.parametrize("audio, side", [
    ({"input": {"sample_rate_hz": 2_000_000_000}}, "input rate of 2000000000 Hz"),
    ({"output": {"format": {"rate": 1}}}, "output rate of 1 Hz"),
])
def test_an_absurd_sample_rate_is_the_servers_error_naming_the_bound(audio, side):
    created = json.dumps({"type": "session.created", "session": {
        "model": "m", "capabilities": CAPS, "audio": audio}})
    text, _, _ = probe_against(answering(created), connect_timeout="5", close_timeout="0.2")
    assert f"says an {side}, outside the bound of 8000-192000 Hz" in text, text
    assert "free the machine" not in text and "\n" not in text


def test_a_flood_of_events_is_the_servers_error_naming_the_bound(monkeypatch):
    flood = ['{"type": "response.listen"}'] * (wire.MAX_EVENTS_PER_S + 5)
    # the flood arrives within one second: on the session's clock, held still (reading 1,005
    # events takes over a second of a loaded machine, which would be no flood at all)
    monkeypatch.setattr(vllm_omni, "time", SimpleNamespace(monotonic=lambda: 100.0))
    with pytest.raises(ModelError, match=rf"sent more than {wire.MAX_EVENTS_PER_S} events in "
                                         "one second .*a flood, a server error") as e:
        asyncio.run(translated(session(flood), len(flood)))
    assert not isinstance(e.value, TransientModelError)


def test_audio_far_ahead_of_real_time_is_the_servers_error_naming_the_bound(monkeypatch):
    monkeypatch.setattr(wire, "MAX_AHEAD_S", 2.0)  # 120 s in a run: the same arithmetic
    pcm = np.zeros(24_000, "<i2").tobytes()  # a second a message, all at once
    deltas = [json.dumps({"type": "response.output_audio.delta", "response_id": "resp_1",
                          "delta": base64.b64encode(pcm).decode()})] * 3
    with pytest.raises(ModelError, match="more than 2 s ahead of real time"):
        asyncio.run(translated(session(deltas), 3))


def test_a_message_past_the_size_bound_ends_the_session_as_a_model_error(monkeypatch):
    monkeypatch.setattr(wire, "MAX_MESSAGE", 1 << 16)
    created = json.dumps({"type": "session.created", "session": {
        "model": "m", "capabilities": CAPS}})
    huge = json.dumps({"type": "response.output_audio.delta", "response_id": "r",
                       "delta": "A" * (1 << 17)})

    async def handler(ws):
        await read_json(ws)
        await ws.send(created)
        await asyncio.sleep(0.1)
        await ws.send(huge)
        await hold(ws)

    async def main():
        async with HostileWS(handler) as server:
            m = VllmOmni(url=server.url)
            s = await m.connect(None)
            try:
                with pytest.raises(ModelError) as e:
                    async for _ in s.events():
                        pass
            finally:
                await s.close()
            return e.value

    err = asyncio.run(main())
    assert "sent a message over the bound of 65536 bytes" in str(err)
    assert not isinstance(err, TransientModelError)


@pytest.mark.parametrize("raw", [
    '{"type": "response.output_audio.delta", "response_id": "r", "delta": 5}',
    '{"type": "response.output_audio.delta", "response_id": "r", "delta": "AAA"}',
    '{"type": "response.done", "response_id": "r", "response": [1]}',
    '{"type": "response.done", "response_id": "r", "response": {"status_details": 3}}',
])
def test_a_malformed_event_is_a_model_error_never_a_traceback(raw):
    async def main():
        s = session([raw])
        async for _ in s.events():
            pass

    try:
        asyncio.run(asyncio.wait_for(main(), 0.5))
    except (ModelError, asyncio.TimeoutError):
        pass  # a model error, or an event read as harmless


def test_a_probe_whose_connection_is_closed_at_once_says_so_in_one_line():
    async def close_at_once(ws):
        await ws.close()

    text, _, _ = probe_against(close_at_once, connect_timeout="5", close_timeout="0.2")
    assert "closed the connection before session.created" in text and "\n" not in text, text
