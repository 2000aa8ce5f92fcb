"""grok-voice and qwen-omni-realtime end to end: the real openai SDK client against the fake
realtime server speaking the xAI and DashScope dialects (tests/fakes/realtime_server.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets

import numpy as np
import pytest

from pytest_duplexact import models
from pytest_duplexact.data import audio
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError, check_transport
from pytest_duplexact.models.providers.realtime_dialects import grok_voice, qwen_omni_realtime
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.support.realtime import (
    answered,
    assert_dropped_mid_instance,
    assert_transcript_cut_at,
    assert_transcript_never_ahead,
    event_kinds,
    fake,
    load_allowance,
    on_client_clock,
    played_until,
    run_timed_trials,
    run_trial,
    stall,
    user_clip,
)

CHUNK = 0.020
TOLERANCE = 0.040
SILENCE_MS = 200

DIALECTS = {  # registry name -> (fake dialect, factory, key variable)
    "grok-voice": ("xai", grok_voice, "XAI_API_KEY"),
    "qwen-omni-realtime": ("dashscope", qwen_omni_realtime, "DASHSCOPE_API_KEY"),
}


@pytest.fixture(params=sorted(DIALECTS))
def dialect(request, monkeypatch):
    """(name, fake dialect, factory, key): a fresh key per test in that provider's variable,
    and an OpenAI key that must never reach these providers."""
    name = request.param
    kind, factory, env = DIALECTS[name]
    key = f"{kind}-test-" + secrets.token_hex(16)
    monkeypatch.setenv(env, key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-must-not-be-sent")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return name, kind, factory, key


def model_for(dialect, server, script=None, **options):
    _, _, factory, _ = dialect
    if script is not None:
        options["instructions"] = "SCRIPT " + json.dumps(script)
    return factory(base_url=server.base_url, silence_duration_ms=str(SILENCE_MS), **options)


TRIALS = [(0.60, 300, 0.50), (0.80, 450, 0.80), (0.50, 600, 1.00), (0.70, 350, 0.60),
          (0.60, 500, 0.90), (0.90, 400, 0.70)]


@pytest.mark.asyncio
async def test_onsets_and_offsets_land_within_40ms_of_the_servers_send_times(dialect):
    name, kind, _, _ = dialect
    async with fake.FakeRealtimeServer(dialect=kind) as server:
        results = await run_timed_trials(server, TRIALS, functools.partial(model_for, dialect),
                                         tail_s=0.3)

    errors = []
    for (end, answer_ms, speak), ((rec, snapshots, t0, _), session) in zip(TRIALS, results):
        [response] = session.responses
        assert response.status == "completed"
        sent = on_client_clock(session, response.audio_start, t0)
        heard_end = on_client_clock(session, played_until(session), t0)
        onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
        errors += [onset - sent, offset - heard_end]
        # on a loaded machine the bound holds up to the stall the harness recorded
        allowed = TOLERANCE + load_allowance(rec)
        assert max(abs(onset - sent), abs(offset - heard_end)) <= allowed, \
            (onset - sent, offset - heard_end, allowed)
        assert_transcript_never_ahead(rec, snapshots)
    errors = np.abs(errors)
    print(f"{name}: onset/offset |error| over {len(TRIALS)} trials: median "
          f"{np.median(errors) * 1000:.1f} ms, max {errors.max() * 1000:.1f} ms; largest loop "
          f"stall {max(stall(t.record) for t, _ in results) * 1000:.0f} ms")


@pytest.mark.asyncio
@pytest.mark.parametrize("pace", [4.0, 1.25])
async def test_barge_in_cuts_playback_locally_without_a_truncate(dialect, pace):
    name, kind, _, _ = dialect
    script = {"answer_after_ms": 300, "speak_s": 1.5, "pace": pace, "max_responses": 1,
              "text": "a long answer that the user is about to interrupt"}
    async with fake.FakeRealtimeServer(dialect=kind) as server:
        clip = user_clip([(0.2, 0.6), (1.4, 1.8)], total=2.4)
        rec, _, t0, _ = await run_trial(model_for(dialect, server, script), clip)
        session = server.sessions[0]

    barge_in = [t for k, t, _ in session.speech if k == "started"][1]
    started_at = on_client_clock(session, barge_in, t0)
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    print(f"{name} barge-in (pace {pace}): playback stopped {(offset - started_at) * 1000:+.1f} "
          "ms from the server's speech_started")
    assert abs(offset - started_at) <= CHUNK + 0.005 + load_allowance(rec)
    if pace < 1.5:  # still generating at the barge-in: the provider cancelled it
        assert session.responses[0].status == "cancelled"
    # no truncate call went out (the provider has none), and the server saw no bad event
    assert not session.of_type("conversation.item.truncate")
    assert not session.of_type("error", sent=True)
    assert_transcript_cut_at(rec, offset, script["text"])
    kinds = event_kinds(rec)
    assert kinds.count("speech_started") == 2 and "truncate" in kinds


@pytest.mark.asyncio
async def test_session_setup_speaks_the_dialect(dialect):
    name, kind, _, key = dialect
    async with fake.FakeRealtimeServer(dialect=kind) as server:
        model = model_for(dialect, server, voice="rex" if kind == "xai" else "Ethan",
                          instructions="Be brief.", vad_threshold="0.6")
        d = await StreamingDuplex.open(model, None)
        await d.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
        await asyncio.sleep(0.6 if kind == "xai" else 0)  # let a few xAI pings arrive
        await d.close()
        session = server.sessions[0]

    assert session.authorization == f"Bearer {key}"
    assert session.query["model"] == [model.model]
    update = session.of_type("session.update")[0]["session"]
    td = {"type": "server_vad", "threshold": 0.6, "silence_duration_ms": SILENCE_MS}
    assert update["turn_detection"] == td and update["instructions"] == "Be brief."
    assert not session.of_type("error", sent=True)  # every field is one the provider knows
    if kind == "xai":
        assert session.path == "/v1/realtime" and model.model == "grok-voice-latest"
        pcm = {"type": "audio/pcm", "rate": 24000}
        assert update["audio"] == {"input": {"format": pcm}, "output": {"format": pcm}}
        assert update["voice"] == "rex"
        assert session.sent[0]["type"] == "conversation.created"
        assert session.of_type("ping", sent=True)
    else:
        assert session.path == "/api-ws/v1/realtime"
        assert model.model == "qwen3-omni-flash-realtime"
        assert update["input_audio_format"] == "pcm16"
        assert update["output_audio_format"] == "pcm24"
        assert update["voice"] == "Ethan" and update["modalities"] == ["text", "audio"]
        assert (model.input_sample_rate, model.output_sample_rate) == (16000, 24000)
    # the input went out at the dialect's rate: 200 ms, less the resampler's lookahead
    sent_ms = sum(a["audio_ms"] for a in session.of_type("input_audio_buffer.append"))
    lookahead = 0 if model.input_sample_rate == SAMPLE_RATE else 4
    assert sent_ms == pytest.approx(200 - lookahead)


@pytest.mark.asyncio
async def test_grok_voice_sample_rate_is_data(monkeypatch):
    """xAI takes pcm at 8-48 kHz (DashScope's rates are fixed by its format names)."""
    monkeypatch.setenv("XAI_API_KEY", "xai-test-key")
    script = {"answer_after_ms": 300, "speak_s": 0.5}
    async with fake.FakeRealtimeServer(dialect="xai") as server:
        model = model_for(("grok-voice", "xai", grok_voice, "XAI_API_KEY"), server, script,
                          sample_rate="16000")
        rec, _, _, _ = await run_trial(model, user_clip([(0.2, 0.6)], total=1.6),
                                       until=answered(server))
        session = server.sessions[0]
    assert session.config["audio"]["input"]["format"]["rate"] == 16000
    assert session.config["audio"]["output"]["format"]["rate"] == 16000
    assert session.responses[0].status == "completed"
    assert fake.energy_bounds(rec.output, SAMPLE_RATE) is not None
    with pytest.raises(ModelConfigError, match="sample_rate"):
        grok_voice(sample_rate="96000")


@pytest.mark.asyncio
async def test_usage_is_kept_per_session(dialect):
    name, kind, _, _ = dialect
    script = {"answer_after_ms": 300, "speak_s": 0.6, "text": "three short words"}
    async with fake.FakeRealtimeServer(dialect=kind) as server:
        # on until the fake has answered (a loaded machine answers late), so the input may
        # run past the clip: it is counted as what was sent
        rec, _, _, session = await run_trial(model_for(dialect, server, script),
                                             user_clip([(0.2, 0.6)], total=1.8),
                                             until=answered(server))
        truth = server.sessions[0]
    usage = session.usage
    assert usage["responses"] == 1
    assert usage["audio_out_s"] == pytest.approx(0.6, abs=1e-3)
    assert len(rec.input) >= 1.8 * SAMPLE_RATE
    assert usage["audio_in_s"] == pytest.approx(len(rec.input) / SAMPLE_RATE, abs=0.01)
    done = truth.of_type("response.done", sent=True)[0]["response"]
    if kind == "dashscope":  # the provider's token counts, summed, nested keys dotted
        assert usage["output_tokens"] == done["usage"]["output_tokens"] > 0
        assert usage["output_tokens_details.audio_tokens"] == 15
    else:  # xAI bills by the minute: no token counts, the audio seconds are the measure
        assert "output_tokens" not in usage


# --- keys, URLs and preflight ------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_missing_key_fails_preflight_with_one_clear_message(name, monkeypatch):
    _, _, env = DIALECTS[name]
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(ModelError, match=f"{name}: no API key. Set the {env}"):
        models.preflight(name)
    monkeypatch.setenv(env, "k")
    models.preflight(name, voice="x")
    with pytest.raises(ModelError, match=f"set {env} in the environment"):
        models.preflight(name, api_key="k")
    with pytest.raises(ModelError, match="unknown option.*colour"):
        models.preflight(name, colour="blue")
    with pytest.raises(ModelError, match="silence_duration_ms"):
        models.preflight(name, silence_duration_ms="soon")


@pytest.mark.parametrize("url, ok", [
    ("https://api.x.ai/v1", True), ("wss://example.com/v1", True),
    ("http://127.0.0.1:8080/v1", True), ("ws://localhost:9/v1", True),
    ("http://[::1]:8080/v1", True), ("http://127.1.2.3/v1", True),
    ("http://10.0.0.5:8080/v1", False), ("ws://gpu-box.lan/v1", False),
    ("http://localhost.evil.com/v1", False), ("http://127.0.0.1.nip.io/v1", False),
])
def test_a_key_never_travels_in_clear_text_off_this_machine(url, ok):
    """The decision is on the URL alone: nothing connects anywhere."""
    check = lambda allow: check_transport("m", url, key_env="K", carries_key=True,  # noqa
                                          allow_insecure=allow)
    if ok:
        check(False)
    else:
        with pytest.raises(ModelConfigError, match="refusing to send K over unencrypted"):
            check(False)
        check(True)  # explicitly opted in
    # without a key there is nothing to protect
    check_transport("m", url, key_env="K", carries_key=False, allow_insecure=False)
    with pytest.raises(ModelConfigError, match="must start with"):
        check_transport("m", "ftp://x/v1", key_env="K", carries_key=True, allow_insecure=True)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_the_adapters_apply_the_clear_text_rule(name, monkeypatch):
    _, factory, env = DIALECTS[name]
    monkeypatch.setenv(env, "k")
    with pytest.raises(ModelError, match=f"refusing to send {env}"):
        models.preflight(name, base_url="http://192.168.1.20:8000/v1")
    models.preflight(name, base_url="http://192.168.1.20:8000/v1", allow_insecure="true")


@pytest.mark.asyncio
async def test_the_key_is_never_written_anywhere(dialect, tmp_path, caplog):
    name, kind, _, key = dialect
    caplog.set_level(logging.DEBUG, logger="pytest_duplexact")
    async with fake.FakeRealtimeServer(dialect=kind) as server:
        model = model_for(dialect, server, {"answer_after_ms": 300, "speak_s": 0.3})
        rec, _, _, session = await run_trial(model, user_clip([(0.1, 0.3)], total=1.0))
        assert server.sessions[0].authorization == f"Bearer {key}"
        headers = server.sessions[0]
    async with fake.FakeRealtimeServer(dialect=kind, deny_keys=True) as server:
        with pytest.raises(ModelConfigError, match=f"HTTP 401.*{DIALECTS[name][2]}") as rejected:
            await StreamingDuplex.open(model_for(dialect, server), None)
    echoed = session._translate({"type": "error", "error": {
        "type": "invalid_request_error", "message": f"Incorrect API key provided: {key}"}})
    assert key not in echoed.message
    audio.write(tmp_path / "output.wav", rec.output)
    (tmp_path / "run.json").write_text(json.dumps({
        "model": repr(model), "config": model.session_config(), "events": rec.events,
        "usage": session.usage, "error": str(rejected.value), "echoed": echoed.message}))
    (tmp_path / "log.txt").write_text("\n".join(r.getMessage() for r in caplog.records))
    for path in tmp_path.rglob("*"):
        assert key.encode() not in path.read_bytes(), f"key leaked into {path.name}"
    # nothing of the OpenAI configuration travels to another provider
    assert "openai-organization" not in headers.header_names
    assert "authorization" in headers.header_names


@pytest.mark.asyncio
async def test_a_session_the_provider_refuses_is_a_named_final_error(monkeypatch):
    """DashScope's session fields sent to an xAI-style server: refused at setup, by name."""
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test-0123456789")
    async with fake.FakeRealtimeServer(dialect="xai") as server:
        model = qwen_omni_realtime(base_url=server.base_url)
        with pytest.raises(ModelError, match="session setup failed: invalid_value: unknown "
                                             "session field.*input_audio_format") as refused:
            await StreamingDuplex.open(model, None)
    assert type(refused.value) is ModelError  # final: retrying cannot help


@pytest.mark.asyncio
async def test_a_dropped_connection_is_a_model_error(dialect):
    _, kind, _, _ = dialect
    async with fake.FakeRealtimeServer(fake.Script(drop_after_ms=300), dialect=kind) as server:
        await assert_dropped_mid_instance(model_for(dialect, server), ModelError, "mid-instance")
