"""gemini-live end to end: the real google-genai SDK client against the fake Gemini Live server
(tests/fakes/gemini_server.py) over TLS on 127.0.0.1, trusted through SSL_CERT_FILE.

These run on the wall clock, so clips are short and trials run concurrently."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import secrets

import numpy as np
import pytest

# the [gemini] extra and the test CA maker (both in the dev extra)
pytest.importorskip("google.genai")
pytest.importorskip("trustme")

from pytest_duplexact import models
from pytest_duplexact.data import audio
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers import gemini_live
from pytest_duplexact.models.providers.gemini_live import ModelConfigError, factory
from pytest_duplexact.models.streaming_contract import (
    ItemDone,
    ResponseDone,
    SpeechStarted,
    TransientModelError,
)
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from pytest_duplexact.remote.retry import RetryPolicy
from tests.support.realtime import TIMING_TRIALS as TRIALS
from tests.support.realtime import (
    answered,
    assert_dropped_mid_instance,
    assert_transcript_cut_at,
    assert_transcript_never_ahead,
    event_kinds,
    load_allowance,
    load_fake_server,
    on_client_clock,
    played_until,
    run_concurrently,
    run_timed_trials,
    run_trial,
    stall,
    user_clip,
)

CHUNK = 0.020       # the duplex's input chunk (20 ms)
TOLERANCE = 0.040   # onsets and offsets within +-40 ms of the server's send times
SILENCE_MS = 200    # the fake's end-of-speech silence, set through the adapter's option


fake = load_fake_server("gemini_server")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """The fake's server context and the test CA's PEM file (made once: trustme is slow)."""
    ca = tmp_path_factory.mktemp("tls") / "ca.pem"
    ctx, _ = fake.make_tls(str(ca))
    return ctx, str(ca)


@pytest.fixture
def api_key(monkeypatch, tls) -> str:
    """A fresh fake key per test (so a leak check can search for it) and the test CA."""
    key = "AIza-test-" + secrets.token_hex(16)
    monkeypatch.setenv("GEMINI_API_KEY", key)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", tls[1])
    return key


def server(tls, *args, **kwargs):
    return fake.FakeGeminiServer(tls[0], *args, **kwargs)


def model_for(srv, script=None, **options):
    if script is not None:
        options["system_instruction"] = "SCRIPT " + json.dumps(script)
    return factory(base_url=srv.base_url, silence_duration_ms=str(SILENCE_MS), **options)


# --- timing accuracy ---------------------------------------------------------------------

@pytest.mark.asyncio
async def test_onsets_and_offsets_land_within_40ms_of_the_servers_send_times(api_key, tls):
    """The truth is when the fake sent the turn's first audio (on this machine's shared
    clock) and that plus its length: what a listener would hear."""
    async with server(tls) as srv:
        results = await run_timed_trials(srv, TRIALS, model_for, tail_s=1.0)

    errors = []
    for (end, answer_ms, speak), ((rec, snapshots, t0, _), session) in zip(TRIALS, results):
        [turn] = session.turns
        assert turn.status == "completed" and turn.audio_s == pytest.approx(speak), \
            (turn, [s.script.tag for s in srv.sessions].count(session.script.tag), rec.events)
        sent = on_client_clock(session, turn.audio_start, t0)
        heard_end = on_client_clock(session, played_until(session), t0)
        onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
        errors += [onset - sent, offset - heard_end]
        # a stall of this event loop (recorded as input_lag) also delays reading the audio
        # that arrived during it: on a loaded host the bound allows for it (load_allowance)
        allowed = TOLERANCE + load_allowance(rec)
        assert max(abs(onset - sent), abs(offset - heard_end)) <= allowed
        # the output transcription is the native transcript, on the heard audio, never ahead
        assert_transcript_never_ahead(rec, snapshots)
        assert rec.transcript[0].start >= onset - 0.01 and rec.transcript[-1].end <= offset + 0.01
        # the session's usage is what the service reported, plus the audio both ways
        assert rec.usage["prompt_tokens"] == session.usage_sent["promptTokenCount"]
        assert rec.usage["response_tokens"] == session.usage_sent["responseTokenCount"]
        assert rec.usage["total_tokens"] == session.usage_sent["totalTokenCount"]
        assert rec.usage["output_audio_s"] == pytest.approx(speak)
        assert rec.usage["input_audio_s"] == pytest.approx(session.input_ms / 1000)
        assert rec.usage["sessions"] == 1
    errors = np.abs(errors)
    print(f"gemini-live onset/offset |error| over {len(TRIALS)} trials: median "
          f"{np.median(errors) * 1000:.1f} ms, max {errors.max() * 1000:.1f} ms "
          f"(largest loop stall {max(stall(t.record) for t, _ in results) * 1000:.0f} ms)")


# --- barge-in ----------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_interrupted_cuts_playback_within_one_chunk(api_key, tls):
    """The model is still generating (pace 1.25x) when the user barges in: the server sends
    ``interrupted`` and the heard output stops there; no truncate goes to the server."""
    script = {"answer_after_ms": 300, "speak_s": 1.5, "pace": 1.25, "max_turns": 1,
              "text": "a long answer that the user is about to interrupt"}
    async with server(tls) as srv:
        # user: 0.2-0.6 s; model: from ~1.1 s for 1.5 s; the user barges in at 1.6 s
        clip = user_clip([(0.2, 0.6), (1.6, 2.0)], total=2.6)
        rec, _, t0, _ = await run_trial(model_for(srv, script), clip)
        session = srv.sessions[0]

    [turn] = session.turns
    assert turn.status == "interrupted" and turn.audio_s < 1.5
    sent = on_client_clock(session, turn.interrupted_at, t0)
    [cut] = [t for t, what in rec.events if what == "speech_started"]  # its arrival
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    late = load_allowance(rec)
    assert abs(onset - on_client_clock(session, turn.audio_start, t0)) <= TOLERANCE + late
    print(f"gemini-live barge-in: playback stopped {(offset - cut) * 1000:+.1f} ms from "
          f"the arrival of interrupted, {(offset - sent) * 1000:+.1f} ms from its sending")
    # the heard audio ends within one input chunk of the interruption (+ a 5 ms frame), and
    # the interruption was heard when the server sent it (up to any stall of this loop)
    assert -CHUNK - 0.005 <= offset - cut <= CHUNK + 0.005 + late
    assert abs(cut - sent) <= TOLERANCE + late
    assert not np.any(np.abs(rec.output[int((cut + CHUNK) * SAMPLE_RATE):]) > 1e-4)
    # only the client's messages the protocol has: setup and audio (truncate is a no-op)
    assert all(set(m) <= {"t", "audio_ms"} for m in session.received)
    kinds = event_kinds(rec)
    assert kinds.count("speech_started") == 1 and "truncate" in kinds
    assert_transcript_cut_at(rec, offset, script["text"])


@pytest.mark.asyncio
async def test_speech_after_generation_completed_is_not_an_interruption(api_key, tls):
    """The Live API interrupts only a turn still being generated. Audio that was generated
    and is still playing locally keeps playing, as in Google's reference clients (which only
    clear their queue on ``interrupted``)."""
    script = {"answer_after_ms": 300, "speak_s": 1.2, "pace": 0, "max_turns": 1}
    async with server(tls) as srv:
        clip = user_clip([(0.2, 0.6), (1.4, 1.6)], total=2.6)
        rec, _, t0, _ = await run_trial(model_for(srv, script), clip, until=answered(srv, 0.2))
        session = srv.sessions[0]
    [turn] = session.turns
    assert turn.status == "completed" and turn.interrupted_at is None
    assert not any("interrupted" in m for m in session.sent)
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    # all 1.2 s heard: never less; more only by a gap a stall of this loop opened in playback
    assert 1.2 - 0.02 <= offset - onset <= 1.2 + 0.02 + load_allowance(rec)
    assert not any(what == "speech_started" for _, what in rec.events)


@pytest.mark.asyncio
async def test_no_interruption_keeps_the_reply_playing(api_key, tls):
    """interrupt_response=false sends NO_INTERRUPTION: the service keeps generating over the
    user, so nothing is cut."""
    script = {"answer_after_ms": 300, "speak_s": 1.5, "pace": 2.0, "max_turns": 1}
    async with server(tls) as srv:
        # the user speaks again at 1.6 s, while the reply (from ~1.1 s) is still generated
        clip = user_clip([(0.2, 0.6), (1.6, 2.0)], total=3.2)
        rec, _, t0, _ = await run_trial(model_for(srv, script, interrupt_response="false"),
                                        clip, until=answered(srv, 0.2))
        session = srv.sessions[0]
    [turn] = session.turns
    assert turn.status == "completed" and turn.interrupted_at is None
    assert turn.generated > [t for kind, t, _ in session.speech if kind == "started"][1]
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    heard_end = on_client_clock(session, played_until(session), t0)
    assert abs(offset - heard_end) <= TOLERANCE + load_allowance(rec)  # all of it played
    assert not any(what == "speech_started" for _, what in rec.events)


@pytest.mark.asyncio
async def test_a_send_that_stalls_is_a_transient_error(api_key, monkeypatch):
    """A server that stops reading fills the socket buffers; the send has a deadline."""
    monkeypatch.setattr(gemini_live, "SEND_TIMEOUT_S", 0.05)

    class Stuck:
        async def send_realtime_input(self, **_):
            await asyncio.sleep(3600)

    session = gemini_live.GeminiLiveSession(None, Stuck(), "m")
    with pytest.raises(TransientModelError, match="stalled"):
        await session.send(np.zeros(320, np.float32))


def test_turns_are_numbered_and_interrupted_starts_a_new_one(api_key):
    """Translation of the server messages, without a socket."""
    from google.genai import types

    session = gemini_live.GeminiLiveSession(None, None, "m")
    pcm = (np.ones(240, "<i2") * 1000).tobytes()

    def msg(**content):
        return types.LiveServerMessage(server_content=types.LiveServerContent(**content))

    audio_msg = msg(model_turn=types.Content(parts=[types.Part(inline_data=types.Blob(
        data=pcm, mime_type="audio/pcm;rate=24000"))]),
        output_transcription=types.Transcription(text="hi"))
    first = session._translate(audio_msg)  # audio and text in one message (3.x models)
    assert [type(e).__name__ for e in first] == ["AudioDelta", "TranscriptDelta"]
    assert first[0].item_id == first[1].item_id == "turn_0"
    assert session._translate(msg(generation_complete=True)) == [ItemDone("turn_0")]
    assert session._translate(msg(turn_complete=True)) == [ItemDone("turn_0"),
                                                          ResponseDone("completed")]
    assert session._translate(audio_msg)[0].item_id == "turn_1"
    assert session._translate(msg(interrupted=True)) == [SpeechStarted(interrupt=True)]
    assert session._translate(audio_msg)[0].item_id == "turn_2"
    # an interruption before any audio of the next turn does not skip a number
    assert session._translate(msg(interrupted=True)) == [SpeechStarted(interrupt=True)]
    assert session._translate(msg(interrupted=True)) == [SpeechStarted(interrupt=True)]
    assert session._translate(audio_msg)[0].item_id == "turn_3"
    gone = session._translate(types.LiveServerMessage(
        go_away=types.LiveServerGoAway(time_left="10s")))
    assert gone[0].code == "go_away" and not gone[0].fatal and "10s" in gone[0].message
    usage = types.LiveServerMessage(usage_metadata=types.UsageMetadata(
        prompt_token_count=10, response_token_count=5, total_token_count=15))
    session._translate(usage)
    session._translate(usage)
    assert session.usage["prompt_tokens"] == 20 and session.usage["total_tokens"] == 30
    assert session.usage["output_audio_s"] == pytest.approx(4 * 240 / 24000)


# --- the protocol the adapter speaks -----------------------------------------------------

@pytest.mark.asyncio
async def test_setup_carries_the_options_and_input_is_pcm16_at_16khz(api_key, tls):
    async with server(tls) as srv:
        model = factory(base_url=srv.base_url, voice="Kore", system_instruction="Be brief.",
                        temperature="0.4", start_sensitivity="HIGH", end_sensitivity="low",
                        prefix_padding_ms="40", silence_duration_ms="300",
                        interrupt_response="false")
        d = await StreamingDuplex.open(model, None)
        await d.push(np.zeros(int(0.1 * SAMPLE_RATE), np.float32))
        await d.close()
        session = srv.sessions[0]
        headers = srv.headers_seen[0]

    assert session.path == ("/ws/google.ai.generativelanguage.v1beta.GenerativeService."
                            "BidiGenerateContent")
    assert headers["x-goog-api-key"] == api_key and api_key not in session.path
    setup = session.setup
    assert setup["model"] == "models/gemini-3.1-flash-live-preview"
    gen = setup["generationConfig"]
    assert gen["responseModalities"] == ["AUDIO"] and gen["temperature"] == 0.4
    assert fake.get(fake.get(fake.get(gen, "speechConfig"), "voiceConfig"),
                    "prebuiltVoiceConfig") == {"voice_name": "Kore"}
    assert setup["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert setup["outputAudioTranscription"] == {}
    rt = fake.get(setup, "realtimeInputConfig")
    assert fake.get(rt, "automaticActivityDetection") == {
        "disabled": False, "start_of_speech_sensitivity": "START_SENSITIVITY_HIGH",
        "end_of_speech_sensitivity": "END_SENSITIVITY_LOW", "prefix_padding_ms": 40,
        "silence_duration_ms": 300}
    assert fake.get(rt, "activityHandling") == "NO_INTERRUPTION"
    assert session.mime_types == {"audio/pcm;rate=16000"}
    # 16 kHz is the model's own rate: no resampler, whole 20 ms chunks
    assert [round(m["audio_ms"]) for m in session.received] == [20] * 5


def test_options_arrive_as_strings_and_bad_ones_are_named(api_key):
    model = factory(automatic_activity_detection="off", temperature="none",
                    silence_duration_ms="250")
    assert model.automatic_activity_detection is False and model.temperature is None
    assert model.live_config()["realtime_input_config"]["automatic_activity_detection"] == {
        "disabled": True, "silence_duration_ms": 250}
    default = factory().live_config()
    assert "temperature" not in default and "system_instruction" not in default
    with pytest.raises(ModelConfigError, match="unknown option.*colour"):
        factory(colour="blue")
    with pytest.raises(ModelConfigError, match="start_sensitivity"):
        factory(start_sensitivity="medium")
    with pytest.raises(ModelConfigError, match="silence_duration_ms"):
        factory(silence_duration_ms="soon")
    with pytest.raises(ModelConfigError, match="environment"):
        factory(api_key="AIza-in-a-config-file")


def test_plain_http_is_refused_off_loopback(api_key):
    with pytest.raises(ModelConfigError, match="plain http://.*https://"):
        factory(base_url="http://proxy.example.com:8080")
    with pytest.raises(ModelConfigError, match="plain ws://.*unencrypted"):
        factory(base_url="ws://10.0.0.5")
    with pytest.raises(ModelConfigError, match="https:// URL"):
        factory(base_url="ftp://example.com")
    for ok in ("http://127.0.0.1:9000", "http://localhost:1", "http://[::1]:2",
               "https://proxy.example.com", "wss://proxy.example.com"):
        assert factory(base_url=ok).base_url == ok


# --- preflight and the API key -----------------------------------------------------------

@pytest.mark.asyncio
async def test_preflight_names_the_missing_key_before_connecting(monkeypatch, tls):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    async with server(tls) as srv:
        with pytest.raises(ModelError, match="GEMINI_API_KEY.*GOOGLE_API_KEY"):
            models.preflight("gemini-live", base_url=srv.base_url)
        assert srv.handshakes == 0
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-the-other-variable")
    models.preflight("gemini-live")  # either variable will do


def test_preflight_names_the_missing_package(monkeypatch, api_key):
    real = importlib.util.find_spec
    monkeypatch.setattr(gemini_live.importlib.util, "find_spec",
                        lambda name, *a: None if name == "google.genai" else real(name, *a))
    with pytest.raises(ModelError, match=r"google.genai'? (package|is not installed).*"
                                         r"pytest-duplexact\[gemini\]"):
        models.preflight("gemini-live")


@pytest.mark.asyncio
async def test_the_key_is_never_written_anywhere(api_key, tls, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="pytest_duplexact")
    caplog.set_level(logging.DEBUG, logger="google_genai")
    async with server(tls) as srv:
        model = model_for(srv, {"answer_after_ms": 300, "speak_s": 0.3})
        rec, _, _, _ = await run_trial(model, user_clip([(0.1, 0.3)], total=1.2))
        assert srv.headers_seen[0]["x-goog-api-key"] == api_key  # it was used
    async with server(tls, fake.Script(
            close_after_ms=0, close_code=1008,
            close_reason=f"API key not valid. Please pass a valid API key. ({api_key})")) as srv:
        with pytest.raises(ModelConfigError) as rejected:
            await StreamingDuplex.open(model_for(srv), None)
    assert "API key" in str(rejected.value) and "GEMINI_API_KEY" in str(rejected.value)
    audio.write(tmp_path / "output.wav", rec.output)
    (tmp_path / "run.json").write_text(json.dumps({
        "model": repr(model), "config": model.live_config(), "events": rec.events,
        "transcript": [w.text for w in rec.transcript], "usage": rec.usage,
        "error": str(rejected.value)}))
    (tmp_path / "log.txt").write_text("\n".join(r.getMessage() for r in caplog.records))
    for path in tmp_path.rglob("*"):
        assert api_key.encode() not in path.read_bytes(), f"key leaked into {path.name}"


# --- failures ----------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_dropped_connection_is_a_transient_model_error(api_key, tls):
    async with server(tls, fake.Script(drop_after_ms=300)) as srv:
        await assert_dropped_mid_instance(model_for(srv), TransientModelError,
                                          r"closed the session \(1006")
        assert srv.sessions[0].dropped


@pytest.mark.asyncio
@pytest.mark.parametrize("code, reason, transient", [
    (1011, "RESOURCE_EXHAUSTED: You exceeded your current quota", True),
    (1011, "Internal error encountered.", True),
    (1007, "Request contains an invalid argument.", False),
    (1008, "models/nope is not found for API version v1beta", False),
])
async def test_close_codes_are_transient_or_final(api_key, tls, code, reason, transient):
    script = fake.Script(close_after_ms=200, close_code=code, close_reason=reason)
    async with server(tls, script) as srv:
        d = await StreamingDuplex.open(model_for(srv), None)
        with pytest.raises(ModelError) as failed:
            await d.push(user_clip([(0.1, 0.4)], total=1.0))
        await _close_quietly(d)
    assert isinstance(failed.value, TransientModelError) is transient, failed.value
    assert str(code) in str(failed.value)


async def _close_quietly(d):
    try:
        await d.close()
    except ModelError:
        pass


@pytest.mark.asyncio
async def test_go_away_is_recorded_and_the_close_after_it_retries_the_instance(api_key, tls):
    clip = user_clip([(0.1, 0.3)], total=1.0)
    policy = RetryPolicy(max_attempts=3, backoff_base=0.01, jitter=True)

    def job(srv):
        async def run():
            d = await StreamingDuplex.open(model_for(srv), None)
            try:
                await d.push(clip)
            finally:
                events = list(d.events)
                rec = await d.close()
            return rec, events
        return run

    go_away_first = lambda i: fake.Script(  # noqa: E731
        go_away_after_ms=100 if i == 0 else None, go_away_left_s=0.2)
    async with server(tls, script_for=go_away_first) as flaky, \
            server(tls, reject=2) as limited, \
            server(tls, fake.Script(drop_after_ms=200)) as dead:
        results = await run_concurrently([job(flaky), job(limited), job(dead)], 3, policy)
        assert len(flaky.sessions) == 2 and any("goAway" in m for m in flaky.sessions[0].sent)
        assert limited.rejected == 2 and len(limited.sessions) == 1
        assert len(dead.sessions) == 3
    assert len(results[0][0].input) == len(clip) and len(results[1][0].input) == len(clip)
    assert isinstance(results[2], ModelError) and not isinstance(results[2],
                                                                  TransientModelError)
    assert "gave up after 3 attempts" in str(results[2])


@pytest.mark.asyncio
async def test_usage_of_a_retried_instance_counts_every_attempt(api_key, tls, monkeypatch):
    """run_instance charges the trial with every session it opened, the dropped one too."""
    from pytest_duplexact import pipelines
    from pytest_duplexact.data.instance import bundled_root, load_dataset
    from pytest_duplexact.pipelines.direct import DirectReplay
    from pytest_duplexact.rules import requires

    monkeypatch.setattr("pytest_duplexact.remote.retry.RetryPolicy.delay",
                        lambda self, attempt, retry_after=None: 0.01)
    # a short observation period: this is about accounting, not about the pipeline
    monkeypatch.setattr(pipelines, "pipeline_for", lambda inst, *args: DirectReplay(
        observation_s=0.8))
    inst = next(i for i in load_dataset(bundled_root(), requires=requires).instances
                if i.action == "take_turn")
    drop_first = lambda i: fake.Script(drop_after_ms=500 if i == 0 else None,  # noqa: E731
                                       answer_after_ms=200, speak_s=0.5)
    async with server(tls, script_for=drop_first) as srv:
        rec = await run_instance(inst, model_for(srv))
        sessions = srv.sessions
    assert len(sessions) == 2 and sessions[0].dropped
    assert rec.usage["sessions"] == 2
    sent_audio = sum(s.input_ms for s in sessions) / 1000
    assert rec.usage["input_audio_s"] == pytest.approx(sent_audio, abs=0.05)
    assert rec.usage["prompt_tokens"] == sum(s.usage_sent.get("promptTokenCount", 0)
                                             for s in sessions) > 0
