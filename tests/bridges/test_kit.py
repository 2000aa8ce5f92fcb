"""The bridge kit's server (bridges/kit.py) over a real socket, spoken to with a plain
WebSocket client: framing, one connection = one trial, per-trial state, options, errors."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from pytest_duplexact.bridges import OptionError, SessionEnded, Trial, typed_options, wire
from pytest_duplexact.models.util.ws_session import sync_connect
from tests.bridges.support import served

RATE, FRAME = 16_000, 320


class Session:
    """Echoes its input scaled by ``gain``, says the step number every ``say_every`` steps."""

    def __init__(self, gain: float, say_every: int, trial: Trial, log: list):
        self.gain, self.say_every, self.trial, self.log = gain, say_every, trial, log
        self.k = 0

    def step(self, frame):
        if float(frame[0]) == 99.0:
            raise RuntimeError("boom")
        self.k += 1
        texts = [f" s{self.k}"] if self.say_every and self.k % self.say_every == 0 else []
        with np.errstate(invalid="ignore", over="ignore"):  # the fuzz's frames: inf, nan
            return frame * self.gain, texts

    def close(self):
        self.log.append(("close", self.trial.id, self.k))


class Echo:
    name, sample_rate, frame, transcript = "echo", RATE, FRAME, True

    def __init__(self, mode: str = "stepped"):
        self.mode = mode
        self.log: list = []

    def open(self, options, trial):
        o = typed_options(options, {"gain": 1.0, "say_every": 0})
        self.log.append(("open", trial.id, trial.seed))
        return Session(o["gain"], o["say_every"], trial, self.log)


def recv(ws, timeout=10):
    return wire.split(ws.recv(timeout=timeout))


def ready(ws):
    kind, payload = recv(ws)
    assert kind == wire.READY, (kind, payload)
    return wire.parse_ready(payload)


def test_stepped_trial_round_trip(caplog):
    caplog.set_level(logging.INFO, logger="pytest_duplexact.bridges")
    model = Echo()
    with served(model) as server:
        with connect(f"{server.url}/?gain=0.5&say_every=2&trial_id=t1&run_seed=7") as ws:
            r = ready(ws)
            assert (r.mode, r.sample_rate, r.frame, r.transcript, r.model) == \
                ("stepped", RATE, FRAME, True, "echo")
            got = []
            for k in range(4):
                ws.send(wire.audio(np.full(FRAME, 0.25, np.float32)))
                kinds = []
                while True:
                    kind, payload = recv(ws)
                    kinds.append(kind)
                    if kind == wire.TEXT:
                        got.append((k, wire.utf8(payload)))
                    if kind == wire.AUDIO:
                        np.testing.assert_array_equal(wire.pcm(payload),
                                                      np.full(FRAME, 0.125, np.float32))
                        break
            assert got == [(1, " s2"), (3, " s4")]
            ws.send(wire.frame(wire.PING, b"x"))
            assert recv(ws) == (wire.PONG, b"x")
            ws.send(wire.frame(wire.CLOSE))
            assert recv(ws)[0] == wire.CLOSE
        # a second connection is a second trial with fresh state
        with connect(f"{server.url}/?trial_id=t2") as ws:
            ready(ws)
            ws.send(wire.audio(np.zeros(FRAME, np.float32)))
            assert recv(ws)[0] == wire.AUDIO
            ws.send(wire.frame(wire.CLOSE))
            recv(ws)
    assert model.log == [("open", "t1", 7), ("close", "t1", 4), ("open", "t2", 0),
                         ("close", "t2", 1)]
    assert server.trials == 2
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("trial ")]
    assert len(lines) == 2  # one log line per trial: who, how it ended, how much
    assert lines[0].startswith("trial t1 from 127.0.0.1:") and ": ok, 4 steps, 0.08 s of " \
        "audio in " in lines[0]


@pytest.mark.parametrize("send, says", [
    (wire.audio(np.zeros(FRAME - 1, np.float32)), f"AUDIO of {FRAME - 1} samples, expected "
                                                  f"exactly {FRAME}"),
    (wire.frame(wire.AUDIO, b"abc"), "not whole float32 samples"),
    (wire.audio(np.full(FRAME, 99.0, np.float32)), "failed in step 0 at 0.00 s: RuntimeError: "
                                                   "boom"),
    ("text", "text WebSocket message"),
], ids=["short-frame", "partial-sample", "model-raises", "text-message"])
def test_a_broken_step_ends_the_trial_with_error(send, says):
    model = Echo()
    with served(model) as server:
        with connect(server.url) as ws:
            ready(ws)
            ws.send(send)
            kind, payload = recv(ws)
            assert kind == wire.ERROR and says in wire.utf8(payload), wire.utf8(payload)
    assert model.log[-1][0] == "close"  # the session is closed after an error too


def test_bad_options_are_an_error_in_place_of_ready():
    with served(Echo()) as server:
        with connect(f"{server.url}/?volume=2") as ws:
            kind, payload = recv(ws)
        assert kind == wire.ERROR
        assert "unknown option(s) volume; known: gain, say_every" in wire.utf8(payload)
        with connect(f"{server.url}/?gain=loud") as ws:
            assert "option gain: expected float, got 'loud'" in wire.utf8(recv(ws)[1])


def test_streaming_input_is_stepped_in_whole_frames():
    model = Echo("streaming")
    with served(model) as server:
        with connect(server.url) as ws:
            assert ready(ws).mode == "streaming"
            x = np.arange(FRAME * 3, dtype=np.float32) / (FRAME * 3)
            for piece in np.split(x[: FRAME * 2 + 100], [100, 700, 2 * FRAME]):
                ws.send(wire.audio(piece))
            out = [wire.pcm(recv(ws)[1]) for _ in range(2)]
            np.testing.assert_array_equal(np.concatenate(out), x[: 2 * FRAME])
            ws.send(wire.frame(wire.CLOSE))
            assert recv(ws)[0] == wire.CLOSE
    assert model.log[-1] == ("close", "", 2)


def test_a_server_key_is_required_when_set():
    with served(Echo(), api_key="s3cret") as server:
        with pytest.raises(InvalidStatus) as e:
            connect(server.url, open_timeout=10)
        assert e.value.response.status_code == 401
        with connect(server.url, additional_headers={"Authorization": "Bearer s3cret"}) as ws:
            assert ready(ws).model == "echo"


def test_typed_options():
    assert typed_options({"a": "2", "b": "no", "c": "x"}, {"a": 1.0, "b": True, "c": None}) == \
        {"a": 2.0, "b": False, "c": "x"}
    with pytest.raises(OptionError, match="option b: expected bool"):
        typed_options({"b": "maybe"}, {"b": True})


def test_a_model_that_ends_the_session_sends_close_with_its_reason():
    class Ends(Echo):
        def open(self, options, trial):
            session = super().open(options, trial)

            def step(frame):
                raise SessionEnded("token budget spent")

            session.step = step
            return session

    model = Ends()
    with served(model) as server:
        with connect(server.url) as ws:
            ready(ws)
            ws.send(wire.audio(np.zeros(FRAME, np.float32)))
            assert recv(ws) == (wire.CLOSE, b"token budget spent")
    assert model.log[-1][0] == "close"


def test_stopping_the_server_abandons_a_step_that_never_returns():
    release = threading.Event()

    class Stuck(Echo):
        def open(self, options, trial):
            session = super().open(options, trial)
            session.step = lambda frame: release.wait(120)
            return session

    stopped = threading.Event()

    def serve_and_stop():
        with served(Stuck()) as server:
            ws = sync_connect(server.url)
            ready(ws)
            ws.send(wire.audio(np.zeros(FRAME, np.float32)))
        stopped.set()  # served() returned although the step is still stuck
        ws.close()

    worker = threading.Thread(target=serve_and_stop, daemon=True)
    worker.start()
    try:
        assert stopped.wait(60), "the server waited for a stuck model step"
    finally:
        release.set()
