"""vllm-omni: the adapter's reading of vLLM-Omni's duplex events, its playback acks, its
refusals and its errors, below the wall clock (pure translation, a fake socket, a fake
playback clock); the handshakes against the fake server (tests/fakes/vllm_omni_server.py),
which take no streaming time; and one short streamed run of four trials at once (timing
against the fake's send times, and the ack after a barge-in against the recording).
The plugin end to end: tests/plugin/test_vllm_omni_run.py."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.catalogue import builtins
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.vllm_omni import (
    Deployment,
    VllmOmni,
    VllmOmniSession,
    deployment_of,
    factory,
    reach,
    refusal,
)
from pytest_duplexact.models.streaming_contract import (
    AudioDelta,
    Chunker,
    Error,
    ItemDone,
    Note,
    ResponseDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.support.realtime import (
    fake,
    load_allowance,
    load_fake_server,
    played_until,
    run_trial,
    stall,
    user_clip,
)

vf = load_fake_server("vllm_omni_server")
URL = "ws://127.0.0.1:9/v1/realtime?duplex=1"
CAPS = {"implementation_level": "model_native_duplex", "supports_input_append": True,
        "supports_barge_in": True, "supports_session_resume": True,
        "supports_multi_session": True, "supports_audio_truncate": True,
        "chunk_period_ms": 1000}


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("VLLM_OMNI_API_KEY", raising=False)


def model(caps=None, **options) -> VllmOmni:
    m = VllmOmni(url=URL, **options)
    object.__setattr__(m, "deployment", Deployment("openbmb/MiniCPM-o-4_5",
                                                   dict(CAPS if caps is None else caps),
                                                   16_000, 24_000, "pcm16"))
    return m


class FakeSocket:
    def __init__(self):
        self.sent: list[dict] = []

    async def send(self, text):
        self.sent.append(json.loads(text))


def session(caps=None, **options) -> VllmOmniSession:
    m = model(caps, **options)
    s = VllmOmniSession(FakeSocket(), m)
    s.deployment = m.deployment
    return s


def delta(rid="resp_1", ms=100, rate=24_000):
    pcm = (np.full(rate * ms // 1000, 0.25) * 32767).astype("<i2").tobytes()
    return {"type": "response.output_audio.delta", "response_id": rid, "item_id": f"item_{rid}",
            "delta": base64.b64encode(pcm).decode(), "format": "pcm16", "sample_rate_hz": rate}


def kinds(events):
    return [type(e).__name__ for e in events]


# --- what the events become -------------------------------------------------------------------

def test_a_response_becomes_speak_audio_words_and_done():
    s = session()
    assert s.translate({"type": "response.created", "response_id": "resp_1"}) == []
    assert s.translate({"type": "response.speak", "response_id": "resp_1"}) == [
        Note("speak resp_1")]
    [audio] = s.translate(delta())
    assert isinstance(audio, AudioDelta) and audio.item_id == "resp_1"
    assert len(audio.audio) == 2400 and abs(audio.audio[0] - 0.25) < 1e-3
    assert s.translate({"type": "response.output_audio_transcript.delta",
                        "response_id": "resp_1", "delta": "It is sunny"}) == [
        TranscriptDelta("resp_1", "It is sunny")]
    done = s.translate({"type": "response.done", "response_id": "resp_1",
                        "response": {"id": "resp_1", "status": "completed"}})
    assert done == [ItemDone("resp_1"), ResponseDone("completed")]
    assert s.usage["responses"] == 1 and s.usage["audio_out_s"] == pytest.approx(0.1)


def test_audio_without_a_speak_event_still_opens_the_response():
    s = session()
    assert kinds(s.translate(delta())) == ["Note", "AudioDelta"]
    assert kinds(s.translate(delta())) == ["AudioDelta"]


def test_listen_beats_are_recorded_once_per_change_and_end_nothing():
    s = session()
    beat = {"type": "response.listen", "response": {"status": "listening"}}
    assert s.translate(beat) == []  # a session starts listening
    s.translate(delta())
    assert s.translate(beat) == []  # id-less: a decision beat, the response goes on
    s.translate({"type": "response.done", "response_id": "resp_1",
                 "response": {"status": "completed"}})
    assert s.translate(beat) == [Note("listen")]
    assert s.translate(beat) == []
    assert s.usage["listen_decisions"] == 4


@pytest.mark.parametrize("cut", [
    {"type": "response.listen", "response_id": "resp_1"},
    {"type": "overlap.decision", "action": "barge_in", "reason": "server_vad_utterance_active",
     "policy": "barge_in_on_speech"},
    {"type": "output_audio_buffer.cleared", "response_id": "resp_1"},
    {"type": "response.done", "response_id": "resp_1",
     "response": {"status": "cancelled", "status_details": {"reason": "barge_in"}}},
])
def test_what_cuts_playback_of_the_response_being_spoken(cut):
    s = session()
    s.translate(delta())
    events = s.translate(cut)
    assert events.count(SpeechStarted(interrupt=True)) == 1, events
    assert isinstance(events[0], Note)
    # said once: a later cancel of the same response cuts nothing more
    again = s.translate({"type": "response.done", "response_id": "resp_1",
                         "response": {"status": "cancelled"}})
    assert SpeechStarted(interrupt=True) not in again


def test_a_listen_overlap_decision_is_recorded_and_cuts_nothing():
    s = session()
    s.translate(delta())
    events = s.translate({"type": "overlap.decision", "action": "listen",
                          "reason": "long_overlap_speech", "policy": "listen_only"})
    assert events == [Note("overlap.decision listen (long_overlap_speech, policy listen_only)")]


def test_cut_on_listen_false_lets_a_model_listen_play_out():
    s = session(cut_on_listen=False)
    s.translate(delta())
    assert SpeechStarted(interrupt=True) not in s.translate(
        {"type": "response.listen", "response_id": "resp_1"})


def test_audio_at_another_rate_than_the_session_said_is_a_model_error():
    with pytest.raises(ModelError, match="16000 Hz, but the session said 24000 Hz"):
        session().translate(delta(rate=16_000))


@pytest.mark.parametrize("msg, fatal, transient", [
    ({"type": "error", "error": {"type": "rate_limit_error", "code": "resource_exhausted",
                                 "message": "duplex_session_capacity_exhausted: limit=4"}},
     True, True),
    ({"type": "error", "error": {"type": "server_error", "code": "runtime_append_failed",
                                 "message": "stale epoch"}}, True, True),
    ({"type": "error", "error": {"type": "invalid_request_error", "code": "bad_event",
                                 "message": "no"}}, True, False),
    ({"type": "error", "error": {"type": "invalid_request_error", "code": "item_not_found",
                                 "message": "gone", "event_id": "ack_3"}}, False, False),
    ({"type": "session.expired", "reason": "idle_ttl_expired"}, True, True),
    ({"type": "session.resync_required", "reason": "journal_gap"}, True, True),
    ({"type": "session.closed", "reason": "shutdown"}, True, True),
])
def test_errors_are_classified(msg, fatal, transient):
    [err] = session().translate(msg)
    assert isinstance(err, Error)
    assert (err.fatal, err.transient) == (fatal, transient)


def test_a_refused_session_is_transient_only_for_admission():
    busy = refusal({"type": "error", "error": {"type": "rate_limit_error",
                                               "code": "resource_exhausted", "message": "x"}})
    assert isinstance(busy, TransientModelError)
    flat = refusal({"type": "error", "error": "ref_audio is required",
                    "code": "ref_audio_required"})
    assert isinstance(flat, ModelConfigError)
    assert str(flat) == ("vllm-omni: the server refused the session: ref_audio_required: "
                         "ref_audio is required")


# --- playback.ack -----------------------------------------------------------------------------

def test_acks_carry_what_the_playback_clock_played_then_stop_once_played_out():
    s = session()
    clock = {"resp_1": 0}
    s._played = lambda rid: clock[rid]  # the duplex's playback clock, by hand
    s.translate(delta(ms=500))
    s._seq = 7

    async def rounds():
        for played in (0, 120, 120, 500):
            clock["resp_1"] = played
            await s.acknowledge()
        s.translate({"type": "response.done", "response_id": "resp_1",
                     "response": {"status": "completed"}})
        await s.acknowledge()
        await s.acknowledge()

    asyncio.run(rounds())
    acks = [m for m in s._ws.sent if m["type"] == "playback.ack"]
    assert [(a["played_ms"], a["committed_ms"]) for a in acks] == [(120, 120), (500, 500)]
    assert acks[0]["response_id"] == "resp_1" and acks[0]["item_id"] == "item_resp_1"
    assert [m["server_event_seq"] for m in s._ws.sent if m["type"] == "session.event_ack"] == [7]
    assert s._responses["resp_1"].final


@pytest.mark.parametrize("truncate_supported", [True, False])
def test_a_cut_sends_one_truncating_ack_with_what_was_heard(truncate_supported):
    s = session({**CAPS, "supports_audio_truncate": truncate_supported})
    s._played = lambda rid: 0
    s.translate(delta(ms=900))
    asyncio.run(s.truncate("resp_1", 431))
    [ack] = s._ws.sent
    assert ack["type"] == "playback.ack" and ack["played_ms"] == 431
    assert ack.get("truncate", False) is truncate_supported
    asyncio.run(s.acknowledge())  # nothing more about a cut response
    assert len(s._ws.sent) == 1


def test_no_acks_when_the_deployment_does_not_take_them():
    s = session({**CAPS, "supports_playback_ack": False})
    s.attach_playback(lambda rid: 100)
    assert s._ack_task is None
    asyncio.run(s.truncate("resp_1", 50))
    assert s._ws.sent == []


def test_the_duplex_hands_its_playback_clock_to_the_session():
    class Session:
        def attach_playback(self, played):
            self.played = played

        async def events(self):
            await asyncio.Event().wait()
            yield

    async def main():
        s = Session()
        d = StreamingDuplex(s, input_sample_rate=16_000, output_sample_rate=24_000)
        d.playback.add_audio(0.0, "r", np.ones(2400, np.float32))
        d._t0 = d._loop.time() - 0.05  # 50 ms into playback
        played = s.played("r"), s.played("other")
        d._reader.cancel()
        return played

    played, other = asyncio.run(main())
    assert 45 <= played <= 100 and other == 0


# --- the deployment's capabilities decide ------------------------------------------------------

def test_capabilities_are_read_from_session_created():
    created = {"type": "session.created", "session": {
        "model": "nvidia/PersonaPlex", "input_audio_format": "pcm_f32le",
        "audio": {"input": {"sample_rate_hz": 24_000},
                  "output": {"format": {"type": "audio/pcm", "rate": 24_000}}},
        "capabilities": {**CAPS, "supports_barge_in": False, "chunk_period_ms": 80}}}
    d = deployment_of(created, model())
    assert (d.model, d.input_format, d.input_rate, d.output_rate, d.chunk_period_ms) == (
        "nvidia/PersonaPlex", "pcm_f32le", 24_000, 24_000, 80)
    assert "barge in no" in d.describe() and "chunk period 80 ms" in d.describe()


def test_a_barge_in_instance_on_a_deployment_without_barge_in_is_unsupported_not_a_miss():
    m = model({**CAPS, "supports_barge_in": False})
    why = m.unsupported("barge_in")
    assert why.startswith("unsupported by this deployment: openbmb/MiniCPM-o-4_5")
    assert "supports_barge_in" in why and "\n" not in why
    assert m.unsupported("direct") is None and m.unsupported("simulator") is None
    assert model().unsupported("barge_in") is None
    assert model({**CAPS, "supports_barge_in": False},
                 skip_unsupported=False).unsupported("barge_in") is None


def test_the_plugin_records_such_an_instance_as_not_applicable():
    from types import SimpleNamespace

    from pytest_duplexact.data.taxonomy import Pipeline
    from pytest_duplexact.pytest_plugin.session import DuplexactSession

    def _unsupported(model, inst):  # the session's check, on a session with no traits read yet
        return DuplexactSession._unsupported(SimpleNamespace(_traits=None), model, inst)

    m = model({**CAPS, "supports_barge_in": False})
    interrupt = SimpleNamespace(pipeline=Pipeline.BARGE_IN)
    assert _unsupported(m, interrupt).startswith("unsupported by this deployment")
    assert _unsupported(m, SimpleNamespace(pipeline=Pipeline.SIMULATOR)) is None


@pytest.mark.parametrize("caps, options, capacity", [
    (CAPS, {}, None),
    ({**CAPS, "supports_multi_session": False}, {}, 1),
    ({**CAPS, "max_sessions": 4}, {}, 4),
    ({**CAPS, "max_sessions": 4}, {"max_sessions": 2}, 2),
    (CAPS, {"max_sessions": 3}, 3),
])
def test_concurrency_is_capped_at_what_the_deployment_serves(caps, options, capacity):
    assert model(caps, **options).max_concurrency == capacity


def test_what_a_capability_rules_out_is_refused_in_one_line():
    with pytest.raises(ModelConfigError, match="overlap_policy=barge_in_on_speech needs "
                                               "barge-in"):
        model(overlap_policy="barge_in_on_speech").check(
            Deployment("m", {**CAPS, "supports_barge_in": False}, 16_000, 24_000, "pcm16"))
    with pytest.raises(ModelConfigError, match="turn_detection=server_vad needs barge-in"):
        model(turn_detection="server_vad").check(
            Deployment("m", {**CAPS, "supports_barge_in": False}, 16_000, 24_000, "pcm16"))
    turn_based = Deployment("m", {**CAPS, "implementation_level": "turn_based_duplex"},
                            16_000, 24_000, "pcm16")
    with pytest.raises(ModelConfigError, match="turn_based_duplex: it answers only a committed "
                                               "turn; pass turn_detection=server_vad"):
        model().check(turn_based)
    assert model(turn_detection="server_vad").check(turn_based) is turn_based
    assert model(turn_detection="server_vad").session_update()["session"][
        "turn_detection"] == {"type": "server_vad"}
    with pytest.raises(ModelConfigError, match="supports_input_append false"):
        model().check(Deployment("m", {"supports_input_append": False}, 16_000, 24_000,
                                 "pcm16"))


# --- options and the wire ----------------------------------------------------------------------

def test_options_are_refused_in_one_line(tmp_path):
    with pytest.raises(ModelConfigError, match="^vllm-omni: no server"):
        VllmOmni()
    with pytest.raises(ModelConfigError, match="ref_audio .* is not a file"):
        VllmOmni(url=URL, ref_audio=str(tmp_path / "missing.wav"))
    with pytest.raises(ModelConfigError, match="input_format"):
        VllmOmni(url=URL, input_format="mp3")
    with pytest.raises(ModelConfigError, match="ack_ms must be positive"):
        VllmOmni(url=URL, ack_ms=0)


def test_the_endpoint_and_the_open_handshake(tmp_path):
    wav = tmp_path / "voice.wav"
    wav.write_bytes(b"RIFF0000WAVE")
    m = VllmOmni(url="http://gpu-box:8099", ref_audio=str(wav), temperature=0.6)
    assert m.endpoint() == ("ws://gpu-box:8099/v1/realtime?duplex=1&model=openbmb%2F"
                            "MiniCPM-o-4_5&autostart=0")
    assert "duplex=" not in VllmOmni(url="ws://h:1/v1/duplex").endpoint()
    session = m.session_update()["session"]
    assert session["ref_audio"] == "data:audio/wav;base64," + base64.b64encode(
        b"RIFF0000WAVE").decode()
    assert (session["overlap_policy"], session["playback_commit_policy"]) == (
        "listen_only", "ack_only")
    assert session["extra_body"] == {"auto_response": True, "force_listen_count": 0}
    assert session["temperature"] == 0.6 and session["turn_detection"] is None


def test_appends_are_whole_append_ms_pieces_in_the_sessions_format():
    s = session(append_ms=40)
    s._chunks = Chunker(640)  # what start() makes of append_ms at 16 kHz
    asyncio.run(s.send(np.full(320, 0.5, np.float32)))
    assert s._ws.sent == []  # half an append: not due yet
    asyncio.run(s.send(np.full(320, 0.5, np.float32)))
    [append] = s._ws.sent
    assert (append["format"], append["sample_rate_hz"], append["duration_ms"],
            append["audio_end_ms"]) == ("pcm16", 16_000, 40, 40)
    assert len(base64.b64decode(append["audio"])) == 1280


def test_listed_as_a_built_in():
    assert builtins.BUILTINS["vllm-omni"].factory == "pytest_duplexact.models.providers.vllm_omni:factory"


# --- handshakes against the fake (no streaming time) ------------------------------------------

def test_the_probe_reads_the_model_and_its_capabilities_and_closes_its_session():
    async def main():
        async with vf.FakeVllmOmniServer() as server:
            text = await asyncio.to_thread(reach, url=server.url)
            return text, server.sessions[0].closed, server.open

    text, closed, still_open = asyncio.run(main())
    assert text.startswith("openbmb/MiniCPM-o-4_5: model_native_duplex, chunk period 1000 ms")
    assert "barge in yes" in text and "16000 Hz in, 24000 Hz out" in text
    assert closed == "client_close" and not still_open


@pytest.mark.parametrize("script, message", [
    ({"max_sessions": 0}, "vllm-omni: the server refused the session: resource_exhausted: "
                          "duplex_session_capacity_exhausted: limit=0 (at capacity or busy; "
                          "retried)"),
    ({"require_ref_audio": True}, "vllm-omni: the server refused the session: "
                                  "ref_audio_required: ref_audio is required"),
    ({"http_503": 1}, "vllm-omni: HTTP 503 on connect (at capacity or busy); is vllm-omni "
                      "serving a duplex deploy config at"),
])
def test_the_probe_refuses_in_one_line(script, message):
    async def main():
        async with vf.FakeVllmOmniServer(vf.Script(**script)) as server:
            with pytest.raises(ModelConfigError) as e:
                await asyncio.to_thread(factory, url=server.url)
            return str(e.value)

    text = asyncio.run(main())
    assert text.startswith(message) and "\n" not in text


def test_nothing_listening_is_one_line_too():
    with pytest.raises(ModelConfigError, match="^vllm-omni: could not connect: .*is vllm-omni "
                                               "serving a duplex deploy config"):
        factory(url="ws://127.0.0.1:9/v1/realtime?duplex=1", connect_timeout="2")


def test_admission_refused_during_a_run_is_transient_and_http_503_too():
    async def main():
        async with vf.FakeVllmOmniServer(vf.Script(max_sessions=1, http_503=0)) as server:
            m = await asyncio.to_thread(factory, url=server.url)
            first = await m.connect(None)
            with pytest.raises(TransientModelError, match="resource_exhausted"):
                await m.connect(None)
            await first.close()
            server.script = vf.Script(http_503=server.handshakes + 1)
            with pytest.raises(TransientModelError, match="HTTP 503 on connect"):
                await m.connect(None)
            return server.refused

    assert asyncio.run(main()) == 1


def test_a_dropped_session_is_transient_and_resumed_only_to_close_it():
    async def main():
        async with vf.FakeVllmOmniServer(vf.Script(drop_after_ms=100)) as server:
            m = await asyncio.to_thread(factory, url=server.url)
            d = await StreamingDuplex.open(m, None)
            with pytest.raises(TransientModelError, match="dropped"):
                for _ in range(50):  # 1 s at most; the fake drops after 100 ms
                    await d.push(np.zeros(320, np.float32))
            with pytest.raises(TransientModelError):
                await d.close()  # closes the session, then raises the failure
            return server.sessions[-1], dict(server.open)

    rec, still_open = asyncio.run(main())
    assert rec.dropped and rec.resumed and rec.closed == "client_close"
    assert not still_open  # the slot is free at once, not after disconnect_grace_s


# --- one short streamed run: four trials at once ------------------------------------------------

def tone_ms(y: np.ndarray, amplitude: float = 0.3) -> float:
    """Milliseconds of the fake's tone in ``y``, from its energy (a sine's mean square is
    amplitude^2 / 2): what a listener heard of it, playback gaps not counted."""
    return float((y.astype(np.float64) ** 2).sum() / (amplitude ** 2 / 2) / SAMPLE_RATE * 1000)


TRIALS = [  # (user speech end s, answer after ms, speak s, talked over at s or None)
    (0.8, 400, 0.8, None), (0.6, 600, 0.6, None), (0.8, 400, 2.0, 2.0), (0.6, 500, 2.0, 1.9),
]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_four_trials_at_once_onsets_and_the_ack_after_a_barge_in():
    """Units of 100 ms; two trials answer and finish, two are talked over and cut
    (barge_in_on_speech). Onsets against the fake's send times; the truncating ack against
    what the recording holds of the cut response."""
    async with vf.FakeVllmOmniServer() as server:
        def ended(tag):
            """On a loaded machine the answer comes late: the trial runs on until the turn
            ended and what the harness placed of it has played (SETTLE_S at most)."""
            def done(d):
                s = next((s for s in server.sessions if s.script.tag == tag), None)
                return bool(s and s.turns and s.turns[-1].ended != "speaking") and \
                    not d.playback.playing(d.now - 0.1)
            return done

        async def trial(i, end, after, speak, over):
            script = {"chunk_period_ms": 100, "answer_after_ms": after, "speak_s": speak,
                      "tag": str(i), "max_turns": 1}
            m = await asyncio.to_thread(
                factory, url=server.url, instructions="SCRIPT " + json.dumps(script),
                overlap_policy="barge_in_on_speech" if over else "listen_only")
            spans = [(0.2, end)] + ([(over, over + 0.4)] if over else [])
            return await run_trial(m, user_clip(spans, 3.2), block=0.04, until=ended(str(i)))

        results = await asyncio.gather(*(trial(i, *t) for i, t in enumerate(TRIALS)))
        truth = {s.script.tag: s for s in server.sessions if s.script.tag}

    onset_errors, ack_errors = [], []
    for i, ((_, _, speak, over), (rec, _, t0, sess)) in enumerate(zip(TRIALS, results)):
        s = truth[str(i)]
        [turn] = s.turns
        onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
        onset_errors.append(onset - (turn.first_audio_at - t0))
        late = load_allowance(rec)
        assert abs(onset_errors[-1]) <= 0.040 + late, (i, onset_errors[-1], rec.events)
        if over is None:
            # heard until the fake's last delta, sent when it was (late on a loaded machine:
            # its deltas follow the input it hears), has played out
            heard_end = played_until(s) - t0
            assert turn.ended == "completed" and turn.audio_s == pytest.approx(speak)
            assert abs(offset - heard_end) <= 0.05 + late, (i, offset, heard_end, rec.events)
            assert max(a["played_ms"] for a in s.acks) == round(speak * 1000)
            continue
        assert turn.ended == "barge_in"
        [cut] = [a for a in s.acks if a["truncate"]]
        heard_ms = tone_ms(rec.output)
        ack_errors.append(cut["played_ms"] - heard_ms)
        assert abs(ack_errors[-1]) <= 20 + 1000 * late, (cut, heard_ms)
        assert any(what.startswith("overlap.decision barge_in") for _, what in rec.events)
        assert abs(offset - (turn.cut_at - t0)) <= 0.025 + late
    onset_ms = np.abs(onset_errors) * 1000
    print(f"vllm-omni, 4 trials at once: onset |error| vs the fake's send times median "
          f"{np.median(onset_ms):.1f} ms, max {onset_ms.max():.1f} ms; truncating ack - "
          f"recording's heard ms: {', '.join(f'{e:+.0f}' for e in ack_errors)}; largest "
          f"loop stall {max(stall(r.record) for r in results) * 1000:.0f} ms")
