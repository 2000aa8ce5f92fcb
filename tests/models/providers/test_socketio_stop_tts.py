"""Freeze-Omni's ``stop_tts`` before every answer vs a barge-in, below the wall clock: the
adapter tells them apart by which server handler sent what (the socket.io ack of each of our
``audio`` messages closes its handler's output), never by how far apart they arrived, so a
stalled event loop cannot turn an answer's start into a barge-in, nor a fast one the reverse
(issue 30 item 4; docs/models.md, "freeze-omni")."""

from __future__ import annotations

import asyncio
import types

import numpy as np
import pytest

from pytest_duplexact.models.providers import socketio_omni
from pytest_duplexact.models.providers.socketio_omni import DIALECTS, SocketIOSession, freeze_omni
from pytest_duplexact.models.streaming_contract import AudioDelta, SpeechStarted

RATE = socketio_omni.OUTPUT_RATE


class Timeline:
    """The session's handlers called in the order the server's packets arrive, each at a
    stated time on a clock we set (the adapter reads only ``time.monotonic``)."""

    def __init__(self, monkeypatch):
        self.now = 100.0
        monkeypatch.setattr(socketio_omni, "time", types.SimpleNamespace(monotonic=self.clock))
        self.s = SocketIOSession(freeze_omni(server_url="https://127.0.0.1:9", verify="false"),
                                 DIALECTS["freeze-omni"])
        self.s.usage["stop_tts"] = 2  # recording-started's two are behind us

    def clock(self) -> float:
        return self.now

    def at(self, t: float) -> Timeline:
        self.now = 100.0 + t
        return self

    def segment(self, seconds: float, level: float = 0.25) -> None:
        pcm = (np.full(int(seconds * RATE), level) * 32767).astype("<i2").tobytes()
        asyncio.run(self.s._on_audio(pcm))

    def ack(self) -> None:
        self.s._on_ack()

    def stop_tts(self) -> None:
        asyncio.run(self.s._on_stop_tts())

    def events(self) -> list:
        out = []
        while not self.s._events.empty():
            out.append(self.s._events.get_nowait())
        return out


def audio_items(events) -> list[tuple[str, float]]:
    return [(e.item_id, len(e.audio) / RATE) for e in events if isinstance(e, AudioDelta)]


def test_an_answer_start_stays_one_even_when_the_stop_tts_arrives_late(monkeypatch):
    """A fast model's first segment and interrupt()'s stop_tts from ONE handle_audio (no ack
    between them), the loop stalled 50 ms between the two: not a barge-in, nothing cut (the
    old 8 ms arrival window logged it as one and cut the answer's start)."""
    tl = Timeline(monkeypatch)
    tl.at(0.0).segment(0.4)
    tl.at(0.05).stop_tts()
    events = tl.events()
    assert not any(isinstance(e, SpeechStarted) for e in events)
    assert audio_items(events) == [("seg_1", pytest.approx(0.4))]
    assert tl.s._played_until == pytest.approx(100.4)  # the segment plays on, uncut


def test_a_barge_in_cuts_the_old_answer_even_when_the_stop_tts_comes_at_once(monkeypatch):
    """The old answer's last segment rode on one message (its ack came), the stop_tts on the
    next, 1 ms later on a fast loop: a barge-in that cuts it (the old window replayed that
    old segment after the cut as if it were the new answer's)."""
    tl = Timeline(monkeypatch)
    tl.at(0.0).segment(1.0)
    tl.ack()
    tl.at(0.016).segment(1.0)
    tl.ack()
    tl.at(0.017).stop_tts()
    events = tl.events()
    assert [e.interrupt for e in events if isinstance(e, SpeechStarted)] == [True]
    assert [i for i, _ in audio_items(events)] == ["seg_1", "seg_2"]  # nothing replayed
    assert tl.s._played_until == pytest.approx(100.017)  # playback stopped at the stop_tts


def test_a_barge_in_keeps_the_new_answers_first_segment_after_a_stall(monkeypatch):
    """An answer still playing; the new answer's first segment and its stop_tts from one
    handler, 30 ms apart on a stalled loop: the old answer is cut and the new segment plays
    from the cut (the old window dropped it with the cut)."""
    tl = Timeline(monkeypatch)
    tl.at(0.0).segment(1.0)
    tl.ack()
    tl.at(0.3).segment(0.4)
    tl.at(0.33).stop_tts()
    events = tl.events()
    assert [e.interrupt for e in events if isinstance(e, SpeechStarted)] == [True]
    assert audio_items(events) == [("seg_1", pytest.approx(1.0)), ("seg_2", pytest.approx(0.4)),
                                   ("seg_3", pytest.approx(0.4))]  # seg_2 again, after the cut
    assert tl.s._played_until == pytest.approx(100.33 + 0.4)


def test_each_audio_message_asks_for_the_ack(monkeypatch):
    """The discriminator needs the server's ack of every audio message: send() requests it
    with the session's own callback."""
    tl = Timeline(monkeypatch)
    sent = []

    async def emit(event, data=None, namespace=None, callback=None):
        sent.append((event, callback))

    monkeypatch.setattr(tl.s._sio, "emit", emit)
    monkeypatch.setattr(tl.s._sio, "connected", True)
    asyncio.run(tl.s.send(np.zeros(256, np.float32)))
    assert sent == [("audio", tl.s._on_ack)]
