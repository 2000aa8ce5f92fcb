"""The bridge client (models/bridge.py) against servers that break the protocol on purpose
(tests/bridges/hostile.py): a key echoed in a close reason, an ERROR or a TEXT is shown
nowhere, not even in a ``-l`` frame's locals; what a server chooses (READY's rate and frame,
text per step, audio ahead of the clock) is bounded; a stepped step answered twice is a
protocol error. Issue 32, items 1-3, 7, 8, 13."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.bridges import wire
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from tests.bridges.hostile import KEY, KEY_ENV, hostile_server, is_probe, lockstep, ready, silence
from tests.support.tracebacks import shown_with_locals

FRAME = np.zeros(1_920, np.float32)


@pytest.fixture(autouse=True)
def bridge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def stepped(url: str):
    model = resolve_model("bridge", url=url, step_timeout="10", close_timeout="2")
    model.start(SessionInfo(instance=None))
    return model


def steps_until_error(model, n: int = 5) -> ModelError:
    with pytest.raises(ModelError) as failed:
        for _ in range(n):
            model.step(FRAME)
    model.finish()
    return failed.value


def assert_unshown(e: BaseException) -> str:
    shown = shown_with_locals(e)
    assert KEY not in shown, shown
    return shown


# --- keys in what a server says ---------------------------------------------------------------

@pytest.mark.parametrize("where", ["close reason", "ERROR", "CLOSE"])
def test_a_key_echoed_by_a_stepped_server_is_shown_nowhere(where):
    def handler(ws):
        def answer(k):
            if k < 1:
                return [silence()]
            if where == "close reason":
                ws.close(1011, f"bad header Bearer {KEY}")
                return []
            return [wire.frame(wire.ERROR if where == "ERROR" else wire.CLOSE,
                               f"bad header Authorization: Bearer {KEY} ({KEY})".encode())]
        lockstep(ws, answer)

    with hostile_server(handler) as url:
        e = steps_until_error(stepped(url))
    shown = assert_unshown(e)
    assert "Bearer <masked>" in str(e) or f"<{KEY_ENV}>" in str(e), str(e)
    assert "step 1" in shown


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["close reason", "ERROR", "CLOSE", "READY"])
async def test_a_key_echoed_by_a_streaming_server_is_shown_nowhere(where):
    def handler(ws):
        if where == "READY" and not is_probe(ws):
            ws.send(wire.frame(wire.ERROR, f"no worker for Bearer {KEY}".encode()))
            return
        ws.send(ready("streaming"))
        for message in ws:
            kind, _ = wire.split(message)
            if kind == wire.CLOSE:
                ws.send(wire.frame(wire.CLOSE))
                return
            ws.send(silence(480))
            if where == "close reason":
                ws.close(1011, f"bad header Bearer {KEY}")
                return
            if where in ("ERROR", "CLOSE"):
                ws.send(wire.frame(wire.ERROR if where == "ERROR" else wire.CLOSE,
                                   f"echo {KEY}".encode()))
                return

    with hostile_server(handler) as url:
        model = resolve_model("bridge", url=url)
        with pytest.raises(ModelError) as failed:
            session = await model.connect(SessionInfo(instance=None))
            try:
                await session.send(np.zeros(24_000, np.float32))
                async for _ in session.events():
                    pass
            finally:
                await session.close()
    assert_unshown(failed.value)


def test_a_key_echoed_in_text_is_scrubbed_before_it_becomes_words():
    def handler(ws):
        lockstep(ws, lambda k: [wire.text(f" {KEY}"), wire.text(" said"), silence()])

    with hostile_server(handler) as url:
        model = stepped(url)
        words = [w for _ in range(3) for w in model.step(FRAME).transcript]
        model.finish()
    assert words and all(KEY not in w.text for w in words)
    assert f"<{KEY_ENV}>" in [w.text for w in words]


def test_a_refused_handshake_holds_no_key_in_any_local():
    def handler(ws):
        ws.close(1011, f"Bearer {KEY}")

    with hostile_server(handler) as url:
        with pytest.raises(ModelConfigError) as failed:
            resolve_model("bridge", url=url, ready_timeout="5")
    assert "closed or broke the connection before READY" in assert_unshown(failed.value)


# --- bounds on what a server chooses ----------------------------------------------------------

@pytest.mark.parametrize("rate, frame, bound", [
    (10**9, 1_920, "sample_rate 1000000000 Hz is outside the bound of 8000-192000 Hz"),
    (1, 1_920, "sample_rate 1 Hz is outside the bound of 8000-192000 Hz"),
    (24_000, 10**9, "frame of 1000000000 samples is over the bound of 4194303"),
    (24_000, 4_194_304, "is over the bound"),  # cannot fit one 16 MiB message
])
def test_a_ready_outside_the_bounds_is_refused_naming_the_bound(rate, frame, bound):
    def handler(ws):
        ws.send(ready(rate=rate, frame=frame))
        ws.recv(timeout=5)

    with hostile_server(handler) as url:
        with pytest.raises(ModelConfigError, match="bridge: READY ") as refused:
            resolve_model("bridge", url=url)
    assert bound in str(refused.value)


def test_the_largest_frame_within_the_bound_is_accepted():
    assert wire.Ready("stepped", wire.MAX_RATE, wire.MAX_FRAME, False).frame == wire.MAX_FRAME
    assert 4 * wire.MAX_FRAME + 1 <= wire.MAX_MESSAGE


def test_a_stepped_step_answered_with_two_audio_frames_is_a_protocol_error():
    """Seen before the next step goes out when it is already there, else a step later, else
    when the trial ends: the trial fails in every case."""
    def handler(ws):
        lockstep(ws, lambda k: [silence(), silence()] if k == 2 else [silence()])

    with hostile_server(handler) as url:
        model = stepped(url)
        with pytest.raises(ModelError, match=r"the server sent a second AUDIO for one step, "
                                             r"seen after its answer to step [2-5] "):
            try:
                for _ in range(5):
                    model.step(FRAME)
            finally:
                model.finish()


def test_a_second_audio_after_the_last_step_fails_the_trial_at_its_end():
    def handler(ws):
        lockstep(ws, lambda k: [silence(), silence()] if k == 1 else [silence()])

    with hostile_server(handler) as url:
        model = stepped(url)
        model.step(FRAME)
        model.step(FRAME)  # the surplus of this step is met only when the trial ends
        with pytest.raises(ModelError, match="second AUDIO for one step, seen after its "
                                             "answer to step 1 "):
            model.finish()


def test_a_text_flood_in_one_step_is_refused_at_the_bound():
    flood = wire.text("x" * (1 << 20))

    def handler(ws):
        lockstep(ws, lambda k: [flood] * 40 + [silence()])

    with hostile_server(handler) as url:
        e = steps_until_error(stepped(url))
    assert "more than 65536 bytes of TEXT in the answer to step 0" in str(e)


@pytest.mark.asyncio
@pytest.mark.parametrize("flood", ["text", "audio"])
async def test_a_streaming_flood_is_refused_at_its_bound(flood):
    message = wire.text("x" * (1 << 20)) if flood == "text" else silence(1 << 21)

    def handler(ws):
        ws.send(ready("streaming"))
        if is_probe(ws):
            ws.recv(timeout=5)
            return
        for _ in range(200):  # 200 MiB of text or 3.5 min of 24 kHz audio at once
            ws.send(message)

    with hostile_server(handler) as url:
        session = await resolve_model("bridge", url=url).connect(SessionInfo(instance=None))
        with pytest.raises(ModelError) as failed:
            async for _ in session.events():
                pass
        await asyncio.wait_for(session.close(), 30)
    said = str(failed.value)
    assert ("more than 65536 bytes of TEXT" in said if flood == "text"
            else "more than 120 s ahead of real time" in said), said


# --- through pytest: nothing the run writes or prints holds the key ---------------------------

def keyless_run(pytester, handler, limit: int):
    """A stepped run of ``limit`` trials against ``handler`` with ``-l`` and junit.xml:
    (result, output, files written), once no line of output and no file holds the key."""
    with hostile_server(handler) as url:
        res = pytester.runpytest_subprocess(
            "--duplexact-model=bridge", f"--duplexact-model-option=url={url}",
            "--duplexact-condition=take_turn.immediate", f"--duplexact-limit={limit}",
            "--duplexact-transcriber=native", "--duplexact-run-dir=run",
            "--junitxml=junit.xml", "-p", "no:cacheprovider", "-l", timeout=240)
    out = res.stdout.str() + res.stderr.str()
    assert KEY not in out
    written = [p for p in Path(pytester.path).rglob("*") if p.is_file()]
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    return res, out, written


def test_a_run_against_an_echoing_server_writes_and_prints_no_key(pytester):
    """Three trials: one whose TEXT echoes the key (its words reach timeline.json and
    recording.json), one ended by an ERROR quoting it, one closed with a reason quoting it;
    with ``-l`` and junit.xml, no file, no line of output holds it (issue 32 items 1, 2,
    13)."""
    trials = []

    def handler(ws):
        if is_probe(ws):
            ws.send(ready())
            ws.recv(timeout=5)
            return
        trials.append(1)
        n = len(trials)

        def answer(k):
            if n == 1:
                return [wire.text(f" {KEY}"), silence()]
            if k < 3:
                return [silence()]
            if n == 2:
                return [wire.frame(wire.ERROR, f"bad header Bearer {KEY}".encode())]
            ws.close(1011, f"bad header Bearer {KEY}")
            return []
        lockstep(ws, answer)

    res, out, written = keyless_run(pytester, handler, 3)
    assert any(p.name == "error.txt" for p in written) and any(
        p.name == "junit.xml" for p in written)
    assert res.parseoutcomes().get("errors") == 2, out
    assert f"close code 1011: bad header Bearer <{KEY_ENV}>" in out  # the echo, scrubbed
    words = Path(pytester.path, "run", "instances", "take_turn-immediate-casual-01",
                 "recording.json").read_text()
    assert f"<{KEY_ENV}>" in words


def test_a_text_websocket_message_after_an_answer_is_a_protocol_error_not_lost():
    def handler(ws):
        lockstep(ws, lambda k: [silence(), "a text message"] if k == 0 else [silence()])

    with hostile_server(handler) as url:
        e = steps_until_error(stepped(url))
    assert "got a text WebSocket message; every bridge message is binary" in str(e)


def test_a_trial_ended_by_an_error_mid_step_finishes_quietly():
    """The answer to the step the error interrupted may still come before the server's CLOSE:
    that is no surplus."""
    def handler(ws):
        lockstep(ws, lambda k: [wire.text("x" * 70_000), silence()] if k == 1 else [silence()])

    with hostile_server(handler) as url:
        model = stepped(url)
        model.step(FRAME)
        with pytest.raises(ModelError, match="bytes of TEXT"):
            model.step(FRAME)
        model.finish()  # raises nothing


@pytest.mark.parametrize("ending", ["close reason", "ERROR"])
def test_a_streaming_run_against_an_echoing_server_writes_and_prints_no_key(pytester, ending):
    def handler(ws):
        ws.send(ready("streaming"))
        if is_probe(ws):
            ws.recv(timeout=5)
            return
        for message in ws:
            if wire.split(message)[0] == wire.AUDIO:
                if ending == "ERROR":
                    ws.send(wire.frame(wire.ERROR, f"bad header Bearer {KEY}".encode()))
                else:
                    ws.close(1011, f"bad header Bearer {KEY}")
                return

    with hostile_server(handler) as url:
        res = pytester.runpytest_subprocess(
            "--duplexact-model=bridge", f"--duplexact-model-option=url={url}",
            "--duplexact-condition=take_turn.immediate", "--duplexact-limit=1",
            "--duplexact-run-dir=run", "--junitxml=junit.xml", "-p", "no:cacheprovider",
            "-l", timeout=240)
    out = res.stdout.str() + res.stderr.str()
    assert KEY not in out
    assert res.parseoutcomes().get("errors") == 1, out
    assert f"Bearer <{KEY_ENV}>" in out
    for path in Path(pytester.path).rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_run_against_a_server_that_splits_the_key_writes_and_prints_no_key(pytester):
    """The echoed key split across three TEXT messages in three steps: each piece passes the
    scrub of received text, so only the word assembled from them is masked (issue 32)."""
    split = [f" my key is {KEY[:5]}", KEY[5:17], KEY[17:], " ok "]

    def handler(ws):
        lockstep(ws, lambda k: [wire.text(split[k]), silence()] if k < len(split)
                 else [silence()])

    _, out, written = keyless_run(pytester, handler, 1)
    assert any(p.name == "report.json" for p in written), out
    words = Path(pytester.path, "run", "instances", "take_turn-immediate-casual-01",
                 "recording.json").read_text()
    assert f"<{KEY_ENV}>" in words and '"ok"' in words  # masked, the words around it kept
