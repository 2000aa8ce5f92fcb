"""freeze-omni, vita-1.5, lychee-fd and mini-omni2 against their fakes on 127.0.0.1
(tests/fakes/socketio_server.py, lychee_server.py, miniomni_server.py), the real client
libraries (python-socketio, httpx2) on the wall clock. Trials are a few seconds and run
concurrently; timing is checked against what each fake recorded sending."""

from __future__ import annotations

import asyncio
import os
import signal

import numpy as np
import pytest

from pytest_duplexact import models
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.lychee_fd import factory as lychee
from pytest_duplexact.models.providers.mini_omni2 import (
    MultipartReader,
    TurnDetector,
    speech_seconds,
)
from pytest_duplexact.models.providers.mini_omni2 import factory as mini_omni2
from pytest_duplexact.models.providers.socketio_omni import freeze_omni, vita_15
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.support.builders import speech_clip
from tests.support.realtime import (
    assert_dropped_mid_instance,
    event_kinds,
    fake,
    load_allowance,
    load_fake_server,
    run_trial,
    user_clip,
)
from tests.support.servers import child

sio_fake = load_fake_server("socketio_server")
lychee_fake = load_fake_server("lychee_server")
omni_fake = load_fake_server("miniomni_server")
fake_http = load_fake_server("fake_http")
played_end = fake_http.played_end

MARGIN = 0.06  # onset / offset vs the fake's send times: a chunk, on an idle machine


def late_bound(rec) -> float:
    """How late a reply may land behind the fake's send: the margin, plus twice the trial's
    measured stall. The reply crosses the shared loop at least twice before it is stamped (the
    fake's write, then the client's read and dispatch), and each crossing can wait out a stall
    (seen in CI: 156 ms late beside a 76 ms stall)."""
    return MARGIN + load_allowance(rec)


def check_timing(rec, t0, sends):
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    late = late_bound(rec)
    assert -MARGIN <= onset - (sends[0][0] - t0) <= late
    assert -MARGIN <= offset - played_end(sends, t0) <= late


def played_out(finished_sends):
    """A trial's ``until``: the fake answers late on a loaded machine, so the trial runs on
    (in silence) until its last reply has been sent and played, rather than for a fixed
    length (fixed lengths cut a reply's end off in clean-clone CI runs: VITA's last words,
    mini-omni2's last step). ``finished_sends`` gives the last reply's sends once it is the
    last the trial expects and finished, else None."""
    def until(d) -> bool:
        sends = finished_sends()
        return sends is not None and d.now >= played_end(sends, d.started_at) + 0.1
    return until


def last_turn(server, ended: str, turns: int = 1):
    """The socket.io / Lychee fake's first session: its last turn's sends, once it has
    ``turns`` turns and the last one ended ``ended`` (an earlier turn's end never counts)."""
    def sends():
        got = server.sessions[0].turns if server.sessions else []
        return got[-1].sends if len(got) >= turns and got[-1].ended == ended else None
    return sends


# --- freeze-omni / vita-1.5 --------------------------------------------------------------------

async def socketio_reply(name, build):
    script = sio_fake.Script(segments=3, segment_s=0.4)
    async with sio_fake.FakeOmniServer(name, script) as server:
        clip = user_clip([(0.2, 0.8)], total=3.2)
        trial = await run_trial(build(server_url=server.url, verify="false"), clip,
                                until=played_out(last_turn(server, "sent")))
        return script, trial, server.sessions[0]


async def socketio_replies():
    """Both dialects at once: the reply's onset and offset against the fake's send times."""
    results = await asyncio.gather(socketio_reply("freeze-omni", freeze_omni),
                                   socketio_reply("vita-1.5", vita_15))
    for name, (script, (rec, snapshots, t0, session), truth) in zip(("freeze-omni", "vita-1.5"),
                                                                    results):
        [turn] = truth.turns
        assert turn.ended == "sent" and len(turn.sends) == 3
        check_timing(rec, t0, turn.sends)
        # the pull: each segment rode on its own incoming audio message, one after another
        # (counted, not timed: a loaded machine spaces the messages out, never merges them)
        assert turn.send_msgs == list(range(turn.send_msgs[0], turn.send_msgs[0] + 3))
        events = [e["event"] for e in truth.received]
        assert events[-1] == "recording-stopped" and "recording-started" in events
        if name == "vita-1.5":
            assert events[0] == "reset_state"
            assert [w.text for w in rec.transcript] == script.text.split()
            for now, words in snapshots:  # never ahead of playback
                assert all(w.end <= now for w in words)
        else:
            assert rec.transcript == () and "reset_state" not in events
        assert session.usage["segments"] == 3
        assert session.usage["audio_out_s"] == pytest.approx(1.2)


async def socketio_every_answer():
    """Freeze-Omni sends stop_tts before every answer (interrupt() when its state head says
    'ss'); from a fast model it rides on the message carrying the answer's first segment.
    Neither answer loses that segment, and neither is logged as a barge-in."""
    script = sio_fake.Script(segments=2, segment_s=0.4, answer_after_ms=0.0)
    async with sio_fake.FakeOmniServer("freeze-omni", script) as server:
        clip = user_clip([(0.2, 0.6), (2.9, 3.3)], total=4.6)
        rec, _, t0, session = await run_trial(
            freeze_omni(server_url=server.url, verify="false"), clip,
            until=played_out(last_turn(server, "sent", turns=2)))
        truth = server.sessions[0]
    assert [t.ended for t in truth.turns] == ["sent", "sent"]
    assert truth.stops_with_segment == 2  # each stop_tts came in its answer's first message
    # which handler sent the segment is read from the acks, not arrival gaps: exact under load
    assert "speech_started" not in event_kinds(rec)
    ends = [t.decided_at - t0 for t in truth.turns[1:]] + [len(rec.output) / SAMPLE_RATE]
    for turn, b in zip(truth.turns, ends):
        a = turn.decided_at - t0
        heard = rec.output[int(a * SAMPLE_RATE):int(b * SAMPLE_RATE)]
        onset, offset = fake.energy_bounds(heard, SAMPLE_RATE)
        late = late_bound(rec)
        assert -MARGIN <= a + onset - (turn.sends[0][0] - t0) <= late
        assert -MARGIN <= a + offset - played_end(turn.sends, t0) <= late


async def socketio_cut():
    """A barge-in is Freeze-Omni's next 'ss' while an answer still plays: interrupt(), then
    stop_tts on the message carrying the new answer's first segment (a fast model).
    Playback of the old answer stops at its arrival, and the new answer plays from its first
    segment on. (The fake's VAD stays triggered 0.8 s after speech here; 2 s on the real
    server: docs/models.md.)"""
    script = sio_fake.Script(segments=2, segment_s=1.0, answer_after_ms=0.0, vad_end_ms=800.0)
    async with sio_fake.FakeOmniServer("freeze-omni", script) as server:
        clip = user_clip([(0.2, 0.8), (1.7, 2.1)], total=5.2)
        rec, _, t0, session = await run_trial(
            freeze_omni(server_url=server.url, verify="false"), clip,
            until=played_out(last_turn(server, "sent", turns=2)))
        first, second = server.sessions[0].turns
    assert first.ended == "interrupted" and first.cut_at is not None
    cut = first.cut_at - t0
    assert played_end(first.sends, t0) > cut + 0.3  # there was audio left to cut
    # one message carried both (counted, not timed: an await between them yields to a
    # loaded loop)
    assert second.send_msgs[0] == first.cut_msg is not None
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    late = late_bound(rec)
    assert -MARGIN <= onset - (first.sends[0][0] - t0) <= late
    # the new answer, both 1 s segments, played from the cut: none of it dropped
    assert -MARGIN <= offset - (cut + 2.0) <= late
    assert event_kinds(rec).count("speech_started") == 1
    assert session.usage["stop_tts"] >= 4  # recording-started's two, then each answer's


async def socketio_vita_speech_at_once():
    """Speech from the first instant: VITA's VAD thread dies on speech in its first chunk, so
    the adapter sends one chunk of silence before the clock starts (and Freeze-Omni's and
    VITA's recording-started replace the input FIFO: the stream starts after its last
    stop_tts). The turn is answered."""
    async with sio_fake.FakeOmniServer("vita-1.5", sio_fake.Script(segments=1)) as server:
        rec, _, t0, session = await run_trial(
            vita_15(server_url=server.url, verify="false"), user_clip([(0.0, 0.6)], total=2.2),
            until=played_out(last_turn(server, "sent")))
        truth = server.sessions[0]
    assert len(truth.turns) == 1 and truth.turns[0].ended == "sent"
    streamed = len(rec.input) / SAMPLE_RATE  # the instance, and any silence after it
    assert streamed >= 2.2
    assert truth.input_samples == 4096 + streamed * 16000  # the primer, then the instance
    assert session.usage["audio_in_s"] == pytest.approx(streamed)  # the primer is not the user's


async def socketio_http_url():
    """Both servers serve HTTPS only: an http:// URL is reset, and the error says what to do."""
    async with sio_fake.FakeOmniServer("freeze-omni") as server:
        url = server.url.replace("https://", "http://")
        with pytest.raises(TransientModelError, match="serves HTTPS only.*https://.*verify=false"):
            await StreamingDuplex.open(freeze_omni(server_url=url, connect_timeout="5"), None)


async def socketio_full():
    async with sio_fake.FakeOmniServer("freeze-omni", sio_fake.Script(max_users=0)) as server:
        with pytest.raises(TransientModelError, match="too_many_users"):
            await StreamingDuplex.open(freeze_omni(server_url=server.url, verify="false"), None)


async def socketio_dropped():
    async with sio_fake.FakeOmniServer("vita-1.5", sio_fake.Script(drop_after_ms=300)) as server:
        await assert_dropped_mid_instance(vita_15(server_url=server.url, verify="false"),
                                          TransientModelError,
                                          "ended mid-instance")


async def socketio_hung():
    async with sio_fake.FakeOmniServer("freeze-omni", sio_fake.Script(hang=True)) as server:
        with pytest.raises(TransientModelError, match="freeze-omni"):
            await StreamingDuplex.open(freeze_omni(server_url=server.url, verify="false",
                                                   connect_timeout="0.5"), None)


async def socketio_stopped_mid_session():
    """A server process that stops answering mid-session (SIGSTOP): engine.io's heartbeat
    (the server's ping interval + timeout, here 0.4 + 0.4 s) ends the session."""
    server = await asyncio.to_thread(child, "socketio_server.py", "--ping", "0.4")
    try:
        model = freeze_omni(server_url=f"https://127.0.0.1:{server.port}", verify="false",
                            transports="websocket")
        d = await StreamingDuplex.open(model, None)
        await d.push(user_clip([], total=0.3))
        os.kill(server.proc.pid, signal.SIGSTOP)
        with pytest.raises(TransientModelError, match="ended mid-instance"):
            # the heartbeat ends it within ~1 s; pushed 1 s at a time for up to 30 s, so that
            # only a session that never ends fails (6 s in one push once ran out under load)
            for _ in range(30):
                await d.push(user_clip([], total=1.0))
        with pytest.raises(ModelError):
            await d.close()
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        await asyncio.to_thread(server.stop)


@pytest.mark.asyncio
async def test_socketio_failures_are_transient_and_bounded():
    """A full server (too_many_users), a dropped user, a hung handshake (the deadline), a
    server stopped mid-session, an http:// URL for an HTTPS-only server (the hint)."""
    await asyncio.gather(socketio_full(), socketio_dropped(), socketio_hung(),
                         socketio_stopped_mid_session(), socketio_http_url())


async def lychee_tls():
    tls = fake_http.self_signed_tls()
    async with lychee_fake.FakeLycheeServer(tls=tls) as server:
        with pytest.raises(ModelConfigError, match="self-signed.*verify=false"):
            await StreamingDuplex.open(lychee(server_url=server.url), None)
        d = await StreamingDuplex.open(lychee(server_url=server.url, verify="false"), None)
        await d.push(user_clip([], total=0.5))
        await d.close()
        assert len(server.sessions[-1].chunks) == 1


@pytest.mark.asyncio
async def test_tls_is_verified_unless_the_user_opts_out():
    await asyncio.gather(socketio_tls(), lychee_tls())


async def socketio_tls():
    async with sio_fake.FakeOmniServer("vita-1.5", tls=fake_http.self_signed_tls()) as server:
        with pytest.raises(TransientModelError, match="self-signed.*verify=false"):
            await StreamingDuplex.open(vita_15(server_url=server.url), None)
        d = await StreamingDuplex.open(vita_15(server_url=server.url, verify="false"), None)
        await d.push(user_clip([], total=0.3))
        await d.close()
        assert server.sessions[-1].audio_messages > 5


# --- lychee-fd ---------------------------------------------------------------------------------

async def lychee_reply():
    async with lychee_fake.FakeLycheeServer(lychee_fake.Script(speak_s=1.0)) as server:
        clip = user_clip([(0.2, 0.8)], total=2.8)
        rec, snapshots, t0, session = await run_trial(
            lychee(server_url=server.url), clip, until=played_out(last_turn(server, "done")))
        truth = server.sessions[0]
    [turn] = truth.turns
    check_timing(rec, t0, turn.sends)
    assert [w.text for w in rec.transcript] == "one two three four five six".split()
    for now, words in snapshots:
        assert all(w.end <= now for w in words)
    assert truth.start_body["infer_window_ms"] == 400 and truth.stopped
    assert [c["samples"] for c in truth.chunks] == [6400] * 7  # whole 400 ms windows, in order
    assert all(c["rate"] == 16000 and c["sent_header"] for c in truth.chunks)
    assert session.usage["chunks"] == 7 and session.usage["turns"] == 1


async def lychee_cut():
    script = lychee_fake.Script(speak_s=2.0, pace=4.0, max_turns=1)
    async with lychee_fake.FakeLycheeServer(script) as server:
        clip = user_clip([(0.2, 0.8), (2.0, 2.4)], total=3.2)
        rec, _, t0, session = await run_trial(lychee(server_url=server.url), clip)
        [turn] = server.sessions[0].turns
    assert turn.ended == "interrupted"
    cut = turn.cut_at - t0
    _, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    assert played_end(turn.sends, t0) > cut + 0.3
    assert -MARGIN <= offset - cut <= late_bound(rec)
    assert session.usage["interrupts"] == 1 and "speech_started" in event_kinds(rec)


async def lychee_loading():
    async with lychee_fake.FakeLycheeServer(lychee_fake.Script(loading=True)) as server:
        with pytest.raises(TransientModelError, match="HTTP 503.*not loaded"):
            await StreamingDuplex.open(lychee(server_url=server.url), None)


async def lychee_fails_mid_instance(script, match, **options):
    async with lychee_fake.FakeLycheeServer(script) as server:
        d = await StreamingDuplex.open(lychee(server_url=server.url, **options), None)
        with pytest.raises(TransientModelError, match=match):
            await d.push(user_clip([], total=2.0))
        with pytest.raises(ModelError):
            await d.close()


@pytest.mark.asyncio
async def test_lychee_errors_drops_and_deadlines():
    """Loading (503), an `error` event, a dropped event stream, a stream gone silent (the
    heartbeat missing: the event deadline)."""
    S = lychee_fake.Script
    await asyncio.gather(
        lychee_loading(),
        lychee_fails_mid_instance(S(error_after_ms=400), "CUDA out of memory"),
        lychee_fails_mid_instance(S(drop_after_ms=400), "event stream"),
        lychee_fails_mid_instance(S(hang_after_ms=400), "deadline", event_timeout="0.6"))


# --- mini-omni2 --------------------------------------------------------------------------------

async def mini_omni2_reply():
    async with omni_fake.FakeMiniOmniServer() as server:
        clip = speech_clip(0.2, 1.6, total=4.0)
        steps = server.script.steps
        rec, snapshots, t0, session = await run_trial(
            mini_omni2(server_url=server.url), clip,
            until=played_out(lambda: server.sessions[-1].sends if server.sessions and
                             len(server.sessions[-1].sends) == steps else None))
        [req] = server.sessions
    # ReplyOnPause: 0.6 s chunks; speech ends at 1.8 s, the silent chunk [1.8, 2.4) ends it:
    # the request holds exactly the audio up to that chunk's end (which chunk ended the turn),
    # and it cannot leave before the client has streamed that chunk. Lateness is the only
    # load effect and the VAD runs in a thread (its delay is no loop stall, seen 0.33 s in
    # CI), so the upper bound only catches a turn sent past the clip's end (4.0 s).
    assert req.audio_s == pytest.approx(2.4, abs=0.01) and req.rate == 16000
    assert 2.4 - 0.2 <= req.arrived - t0 < 4.0 + load_allowance(rec)
    assert (req.stream_stride, req.max_tokens) == (4, 2048)
    check_timing(rec, t0, req.sends)
    assert [w.text for w in rec.transcript] == "one two three four five six".split()
    assert session.usage["turns"] == 1


def test_mini_omni2_turn_detector_and_multipart_reader_edges():
    m = mini_omni2(server_url="http://127.0.0.1:1")
    # a chunk's speech seconds scripted: silence, talk, talk, pause
    script = iter([0.0, 0.5, 0.3, 0.05])
    det = TurnDetector(m, measure=lambda chunk: next(script))
    chunk = np.ones(9600, np.float32)
    got = [asyncio.run(det.feed(chunk)) for _ in range(4)]
    assert got[:3] == [None, None, None] and len(got[3]) == 3 * 9600  # from the talk chunk on
    reader = MultipartReader()
    body = (b"\r\n--frame\r\nContent-Type: audio/wav\r\n\r\n\x01\x00\x02\x00"
            b"\r\n--frame\r\nContent-Type: text/plain\r\n\r\nhi")
    parts = reader.feed(body[:10]) + reader.feed(body[10:]) + reader.flush()
    assert parts == [("audio/wav", b"\x01\x00\x02\x00"), ("text/plain", b"hi")]
    # a boundary split across reads, byte by byte, is still found (the scan resumes)
    reader = MultipartReader()
    parts = [p for i in range(len(body)) for p in reader.feed(body[i:i + 1])] + reader.flush()
    assert parts == [("audio/wav", b"\x01\x00\x02\x00"), ("text/plain", b"hi")]
    # bounded: no boundary within max_part_bytes is refused at once, naming the bound
    reader = MultipartReader(max_part_bytes=64)
    assert reader.feed(b"\r\n--frame\r\nContent-Type: text/plain\r\n\r\n" + b"y" * 20) == []
    with pytest.raises(ModelError, match="more than 64 bytes without a multipart boundary"):
        reader.feed(b"y" * 40)


async def mini_omni2_fails(script, match):
    async with omni_fake.FakeMiniOmniServer(script) as server:
        d = await StreamingDuplex.open(mini_omni2(server_url=server.url, read_timeout="0.4"),
                                       None)
        with pytest.raises(ModelError, match=match):
            await d.push(speech_clip(0.2, 1.0, total=2.6))
        with pytest.raises(ModelError):
            await d.close()


async def mini_omni2_failures():
    S = omni_fake.Script
    await asyncio.gather(mini_omni2_fails(S(error=True), "HTTP 500"),
                         mini_omni2_fails(S(drop_after_steps=1), "POST /chat"),
                         mini_omni2_fails(S(hang=True), "deadline"),
                         # a reply with no boundary: a model error naming the bound, not a miss
                         mini_omni2_fails(S(raw_bytes=9 << 20), "more than 8388608 bytes "
                                          "without a multipart boundary.*MAX_PART_BYTES"),
                         mini_omni2_fails(S(raw_bytes=1000), "had no multipart boundary"))


# --- the real-time trials, several at once (each runs at 1x) -----------------------------------

@pytest.mark.asyncio
async def test_replies_land_where_the_fakes_sent_them():
    """Onsets and offsets vs the fakes' send times, the native text, each protocol's shape:
    freeze-omni, vita-1.5, lychee-fd and mini-omni2 at once. The VAD network mini-omni2's
    turns need is loaded first: loading it (torch) would stall the others' event loop."""
    speech_seconds(np.zeros(9600, np.float32))
    await asyncio.gather(socketio_replies(), socketio_every_answer(),
                         socketio_vita_speech_at_once(), lychee_reply(), mini_omni2_reply())


@pytest.mark.asyncio
async def test_an_interruption_event_cuts_playback_at_its_arrival():
    """socket.io's stop_tts and Lychee-FD's audio_interrupt, at once."""
    await asyncio.gather(socketio_cut(), lychee_cut())


@pytest.mark.asyncio
async def test_mini_omni2_server_error_drop_and_hang():
    await mini_omni2_failures()


# --- configuration ----------------------------------------------------------------------------

_TLS_EXAMPLE = "https://HOST:8081 --duplexact-model-option verify=false"


@pytest.mark.parametrize("name, example", [("freeze-omni", _TLS_EXAMPLE),
                                           ("vita-1.5", _TLS_EXAMPLE),
                                           ("lychee-fd", "http://HOST:7860"),
                                           ("mini-omni2", "http://HOST:60808")])
def test_a_server_is_required_and_a_password_is_never_shown(name, example):
    with pytest.raises(ModelError, match=f"{name}: no server.*server_url={example}"):
        models.preflight(name)
    models.preflight(name, server_url="http://gpu-box.lan:1")
    with pytest.raises(ModelError, match="unknown option"):
        models.preflight(name, server_url="http://127.0.0.1:1", nope="1")
    with pytest.raises(ModelError, match="refusing") as e:
        models.preflight(name, server_url="http://u:pw-SECRET@gpu-box.lan:1")
    assert "pw-SECRET" not in str(e.value)
    m = models.resolve_model(name, server_url="https://u:pw-SECRET@gpu-box.lan:1")
    assert "pw-SECRET" not in repr(m) and "pw-SECRET" not in m.where
