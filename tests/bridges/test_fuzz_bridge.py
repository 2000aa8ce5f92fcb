"""Fuzzing the bridge's network inputs (issue 32, "What to build" 2): hypothesis draws hostile
servers for the plugin's client (READY fields, message kinds, sizes and orders, close frames,
stalls) and hostile clients for the kit (query strings, message kinds and sizes). Every
outcome is a valid trial or a model error (``ModelError``; the kit: ERROR, CLOSE or a closed
socket); never another exception, never a hang past the deadlines, never a key in a message
or a ``-l`` local, and memory stays bounded.

``DUPLEXACT_FUZZ_EXAMPLES`` sets the examples per test (CI: 200; the longer run in the notes
of issue 32 used more)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect

from pytest_duplexact.bridges import wire
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from tests.bridges.hostile import KEY, KEY_ENV, audio_steps, hostile_server
from tests.bridges.support import served
from tests.bridges.test_kit import FRAME as KIT_FRAME
from tests.bridges.test_kit import Echo
from tests.support.tracebacks import shown_with_locals

EXAMPLES = int(os.environ.get("DUPLEXACT_FUZZ_EXAMPLES", "200"))
MEMORY_BOUND = 1 << 30  # growth of the process's peak RSS over a whole fuzz test


def _fuzz():
    return settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


# --- hostile servers for the client ---------------------------------------------------------

@dataclass
class Script:
    """What the server does: its first messages, then for the k-th AUDIO it receives the
    actions ``steps[k]``; after the last, ``end``."""

    first: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    end: str = "serve"  # serve (one right-sized silence per AUDIO) | close | drop | hang
    frame: int = 1_920


SCRIPT = Script()


def _act(ws, action) -> bool:
    """One action; False when the connection is to end."""
    what, arg = action
    if what == "send":
        ws.send(arg)
    elif what == "text-ws":
        ws.send(arg)  # a str: a text WebSocket message
    elif what == "close":
        ws.close(arg[0], arg[1])
        return False
    elif what == "stall":
        time.sleep(arg)
    return True


def _serve(ws) -> None:
    script = SCRIPT
    for action in script.first:
        if not _act(ws, action):
            return
    for k in audio_steps(ws):
        if k < len(script.steps):
            if not all(_act(ws, action) for action in script.steps[k]):
                return
        elif script.end == "serve":
            ws.send(wire.audio(np.zeros(script.frame, np.float32)))
        elif script.end == "close":
            ws.send(wire.frame(wire.CLOSE, b"done"))
            return
        elif script.end == "drop":
            return
        # "hang": nothing more


def _ready_payload(mode, rate, frame, transcript, extra) -> bytes:
    return json.dumps({"protocol": wire.PROTOCOL, "version": wire.VERSION, "mode": mode,
                       "sample_rate": rate, "frame": frame, "transcript": transcript,
                       "model": f"fuzz {KEY}", **extra}).encode()


json_scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**64)
                | st.floats(allow_nan=True) | st.text(max_size=6))
rates = st.sampled_from([8_000, 16_000, 24_000, 192_000]) | json_scalars | st.integers(-9, 10**12)
frames = (st.sampled_from([160, 1_920, wire.MAX_FRAME]) | st.sampled_from(
    [0, -1, wire.MAX_FRAME + 1, 10**9]) | json_scalars)
readies = st.one_of(
    st.builds(_ready_payload, st.sampled_from(["stepped", "streaming"]) | json_scalars, rates,
              frames, st.booleans() | json_scalars,
              st.dictionaries(st.sampled_from(["protocol", "version", "x", "mode"]),
                              json_scalars, max_size=2)),
    # valid ones, most often: then the steps' messages are what is fuzzed
    *[st.builds(_ready_payload, st.just(mode), st.sampled_from([16_000, 24_000]),
                st.sampled_from([320, 1_920]), st.booleans(), st.just({}))
      for mode in ("stepped", "stepped", "stepped", "streaming")],
    st.binary(max_size=64), st.just(b""), st.just(b"\xff{}"))


def _messages(frame: int):
    """One message of a step's answer: right or wrong in every way the wire allows."""
    audio = np.zeros(frame, np.float32)
    return st.one_of(
        st.just(("send", wire.audio(audio))),
        st.sampled_from([0, 1, frame - 1, frame + 1, 2 * frame]).map(
            lambda n: ("send", wire.audio(np.zeros(max(n, 0), np.float32)))),
        st.just(("send", wire.audio(np.full(frame, np.nan, np.float32)))),
        st.binary(max_size=9).map(lambda b: ("send", wire.frame(wire.AUDIO, b))),
        st.text(max_size=20).map(lambda t: ("send", wire.text(t + f" {KEY}"))),
        st.integers(1, 1 << 17).map(lambda n: ("send", wire.text("w" * n))),
        st.sampled_from([wire.ERROR, wire.CLOSE]).map(
            lambda k: ("send", wire.frame(k, f"Authorization: Bearer {KEY}".encode()))),
        st.binary(max_size=8).map(lambda b: ("send", wire.frame(wire.PING, b))),
        st.just(("send", wire.frame(wire.PONG))),
        st.just(("send", wire.frame(wire.READY, b""))),
        st.tuples(st.integers(3, 255), st.binary(max_size=32)).map(
            lambda t: ("send", wire.frame(t[0], t[1]))),
        st.just(("send", b"")),
        st.just(("text-ws", f"hello {KEY}")),
        st.sampled_from([1000, 1001, 1011, 4000]).map(
            lambda c: ("close", (c, f"bad header Bearer {KEY}"))),
        st.just(("stall", 0.35)))


@st.composite
def scripts(draw) -> tuple[Script, int]:
    ready = draw(readies)
    first = [("send", wire.frame(wire.READY, ready))]
    if draw(st.integers(0, 9)) == 0:  # something else first
        first = [draw(_messages(1_920))] + first
    frame = 1_920
    try:
        frame = wire.parse_ready(ready).frame
    except Exception:
        pass
    steps = draw(st.lists(st.lists(_messages(min(frame, 1 << 16)), max_size=3), max_size=3))
    end = draw(st.sampled_from(["serve", "serve", "close", "drop", "hang"]))
    return Script(first, steps, end, frame), draw(st.integers(1, 4))


def _check(e: BaseException) -> None:
    assert isinstance(e, ModelError), f"{type(e).__name__}: {e}"
    assert KEY not in str(e)
    assert KEY not in shown_with_locals(e)


def _client_trial(url: str, steps: int) -> str:
    try:
        model = resolve_model("bridge", url=url, connect_timeout="5", ready_timeout="1",
                              step_timeout="0.25", close_timeout="0.25")
        assert KEY not in model.name
        if hasattr(model, "frame_size"):
            model.start(SessionInfo(instance=None))
            try:
                for _ in range(steps):
                    out = model.step(np.zeros(model.frame_size, np.float32))
                    assert out.audio.shape == (model.frame_size,)
                    assert all(KEY not in w.text for w in out.transcript)
            finally:
                model.finish()
            return "stepped"
        asyncio.run(_streaming(model))
        return "streaming"
    except Exception as e:
        _check(e)
        return type(e).__name__


async def _streaming(model) -> None:
    session = await model.connect(SessionInfo(instance=None))
    try:
        await session.send(np.zeros(model.input_sample_rate // 10, np.float32))

        async def drain():
            async for ev in session.events():
                assert KEY not in str(getattr(ev, "text", "") or "")

        try:
            await asyncio.wait_for(drain(), 0.4)
        except asyncio.TimeoutError:  # the server went quiet: a valid (short) trial
            pass
    finally:
        await asyncio.wait_for(session.close(), 5)


@pytest.fixture(scope="module")
def hostile_url():
    with hostile_server(_serve) as url:
        yield url


@pytest.mark.slow
def test_any_server_is_a_valid_trial_or_a_model_error(hostile_url, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    seen: dict[str, int] = {}
    before = _peak()

    @_fuzz()
    @given(scripts())
    def run(case):
        global SCRIPT
        SCRIPT, steps = case
        outcome = _client_trial(hostile_url, steps)
        seen[outcome] = seen.get(outcome, 0) + 1

    run()
    print(f"client fuzz: {sum(seen.values())} examples, outcomes {seen}; peak RSS "
          f"{_peak() / 2**20:.0f} MiB (+{(_peak() - before) / 2**20:.0f})")
    assert _peak() - before < MEMORY_BOUND
    assert len(seen) > 2  # the strategies reach valid trials and several kinds of error


# --- hostile clients for the kit ------------------------------------------------------------

query_values = st.text(max_size=8) | st.sampled_from(["0", "-1", "1e9", "x" * 2000, "%00",
                                                      "99999999999999999999"])
queries = st.lists(st.tuples(st.sampled_from([wire.TRIAL_PARAM, wire.SEED_PARAM, "gain",
                                              "say_every", "bogus", "", "a b", "%"]),
                             query_values), max_size=4)


def _client_messages(frame: int):
    return st.one_of(
        st.just(wire.audio(np.zeros(frame, np.float32))),
        st.sampled_from([0, 1, frame - 1, frame + 1, 3 * frame]).map(
            lambda n: wire.audio(np.zeros(n, np.float32))),
        st.just(wire.audio(np.full(frame, np.inf, np.float32))),
        st.just(wire.audio(np.full(frame, 99.0, np.float32))),  # the model raises
        st.binary(max_size=7).map(lambda b: wire.frame(wire.AUDIO, b)),
        st.tuples(st.integers(0, 255), st.binary(max_size=16)).map(
            lambda t: wire.frame(t[0], t[1])),
        st.just(b""), st.text(max_size=5), st.just(wire.frame(wire.PING, b"p")),
        st.just(wire.frame(wire.ERROR, b"client trouble")))


def _encode(pairs) -> str:
    from urllib.parse import quote

    return "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)


def _kit_trial(url: str, query, messages) -> str:
    """One hostile client; what it heard last."""
    try:
        with connect(f"{url}/?{_encode(query)}", open_timeout=10, close_timeout=2,
                     max_size=None) as ws:
            for m in messages:
                ws.send(m)
            last = "open"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                kind, _ = wire.split(ws.recv(timeout=0.3))
                last = wire.kind_name(kind)
                if kind in (wire.ERROR, wire.CLOSE):
                    break
    except TimeoutError:
        return "quiet"  # the server waits for more input: allowed
    except ConnectionClosed:
        return "closed"
    except InvalidHandshake as e:  # the handshake itself refused (a path websockets refuses)
        return f"handshake {type(e).__name__}"
    return last


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stepped", "streaming"])
def test_any_client_is_served_refused_or_closed_and_the_kit_keeps_serving(caplog, mode):
    model = Echo(mode)
    seen: dict[str, int] = {}
    before = _peak()
    with served(model, input_timeout=2.0) as server:
        @_fuzz()
        @given(queries, st.lists(_client_messages(KIT_FRAME), max_size=6))
        def run(query, messages):
            outcome = _kit_trial(server.url, query, messages)
            seen[outcome] = seen.get(outcome, 0) + 1

        run()
        # still serving a well-behaved trial after all of that
        with connect(server.url, open_timeout=10) as ws:
            assert wire.split(ws.recv(timeout=30))[0] == wire.READY
            ws.send(wire.audio(np.ones(KIT_FRAME, np.float32)))
            assert wire.split(ws.recv(timeout=30))[0] == wire.AUDIO  # streaming: as big
            ws.send(wire.frame(wire.CLOSE))
            assert wire.split(ws.recv(timeout=30))[0] == wire.CLOSE
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(e[0] == "close" for e in model.log) < \
                sum(e[0] == "open" for e in model.log):
            threading.Event().wait(0.05)
    opened = sum(e[0] == "open" for e in model.log)
    assert sum(e[0] == "close" for e in model.log) == opened  # no session leaked
    crashed = [r for r in caplog.records if r.name.startswith("websockets")
               and r.levelname == "ERROR"]
    assert not crashed, crashed[0].getMessage()
    print(f"kit fuzz ({mode}): {sum(seen.values())} clients, {opened} sessions, last heard {seen}; "
          f"peak RSS {_peak() / 2**20:.0f} MiB (+{(_peak() - before) / 2**20:.0f})")
    assert _peak() - before < MEMORY_BOUND
