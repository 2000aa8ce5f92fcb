"""gpt-realtime end to end: the real openai SDK client against the fake realtime server.

These run on the wall clock, so clips are short and trials run concurrently."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from pytest_duplexact import models
from pytest_duplexact.data import audio
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers.gpt_realtime import (
    ModelConfigError,
    OpenAIRealtime,
    OpenAIRealtimeSession,
    factory,
)
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from pytest_duplexact.remote.retry import RetryPolicy
from tests.support.realtime import TIMING_TRIALS as TRIALS
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
    run_concurrently,
    run_timed_trials,
    run_trial,
    stall,
    user_clip,
)

CHUNK = 0.020       # the duplex's input chunk (20 ms)
TOLERANCE = 0.040   # the brief: onsets and offsets within +-40 ms of the truth
SILENCE_MS = 200    # the fake server's turn detection, set through the adapter's option
LOOKAHEAD_MS = 4    # input the 16 -> 24 kHz resampler holds back for its filter


def model_for(server, script=None, **options) -> OpenAIRealtime:
    if script is not None:
        options["instructions"] = "SCRIPT " + json.dumps(script)
    return factory(base_url=server.base_url, silence_duration_ms=str(SILENCE_MS), **options)


# --- timing accuracy ---------------------------------------------------------------------

@pytest.mark.asyncio
async def test_onsets_and_offsets_land_within_40ms_of_the_truth(api_key):
    """The truth is when the server actually sent the response's first audio (on this
    machine's shared clock) and that plus its length: what a listener would hear. The
    scripted time (speech end + answer delay) is reported too; the difference is the fake
    server's own scheduling lateness under load, not the harness's."""
    async with fake.FakeRealtimeServer() as server:
        results = await run_timed_trials(server, TRIALS, model_for, tail_s=0.3)

    errors, server_late = [], []
    for (end, answer_ms, speak), ((rec, snapshots, t0, _), session) in zip(TRIALS, results):
        [response] = session.responses
        assert response.status == "completed" and response.audio_s == pytest.approx(speak), \
            (response, [s.script.tag for s in server.sessions].count(session.script.tag),
             rec.events)
        sent = on_client_clock(session, response.audio_start, t0)
        heard_end = on_client_clock(session, played_until(session), t0)
        server_late.append(sent - (end + answer_ms / 1000))
        bounds = fake.energy_bounds(rec.output, SAMPLE_RATE)
        assert bounds is not None, "no model speech recorded"
        onset, offset = bounds
        errors += [onset - sent, offset - heard_end]
        # on a loaded machine the bound holds up to the stall the harness recorded
        allowed = TOLERANCE + load_allowance(rec)
        assert max(abs(onset - sent), abs(offset - heard_end)) <= allowed, \
            (onset - sent, offset - heard_end, allowed)
        # the native transcript sits on the heard audio and was never shown ahead of it
        assert_transcript_never_ahead(rec, snapshots)
        assert rec.transcript[0].start >= onset - 0.01 and rec.transcript[-1].end <= offset + 0.01
    errors = np.abs(errors)
    print(f"onset/offset |error| over {len(TRIALS)} trials: median "
          f"{np.median(errors) * 1000:.1f} ms, max {errors.max() * 1000:.1f} ms; fake server "
          f"sent {np.median(server_late) * 1000:.1f} ms (median) after its script; largest "
          f"loop stall {max(stall(t.record) for t, _ in results) * 1000:.0f} ms")
    # every trial's transcript became visible while its speech was still playing
    assert all(any(words for _, words in trial.snapshots) for trial, _ in results)


# --- barge-in ----------------------------------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.parametrize("pace", [4.0, 1.25])  # all audio already sent / still generating
async def test_barge_in_stops_playback_and_truncates_what_was_played(api_key, pace):
    script = {"answer_after_ms": 300, "speak_s": 1.5, "pace": pace, "max_responses": 1,
              "text": "a long answer that the user is about to interrupt"}
    async with fake.FakeRealtimeServer() as server:
        # user: 0.2-0.6 s; model: from 0.9 s for 1.5 s; user barges in at 1.4 s
        clip = user_clip([(0.2, 0.6), (1.4, 1.8)], total=2.4)
        rec, _, t0, _ = await run_trial(model_for(server, script), clip)
        session = server.sessions[0]

    barge_in = [t for kind, t, _ in session.speech if kind == "started"][1]
    started_at = on_client_clock(session, barge_in, t0)
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    sent = on_client_clock(session, session.responses[0].audio_start, t0)
    assert abs(onset - sent) <= TOLERANCE + load_allowance(rec)
    # playback stopped within one input chunk of the server's speech_started (+ 5 ms frames)
    print(f"barge-in: playback stopped {(offset - started_at) * 1000:+.1f} ms from the "
          f"server's speech_started")
    assert abs(offset - started_at) <= CHUNK + 0.005 + load_allowance(rec)
    truncates = session.of_type("conversation.item.truncate")
    assert len(truncates) == 1
    truncate = truncates[0]
    assert truncate["item_id"] == session.responses[0].item_id
    assert truncate["content_index"] == 0
    # the truncate carries the audio actually played: the heard span is that long, or longer
    # only by a gap a stall of this loop opened between deltas (played_ms skips the gap)
    heard_s = offset - onset
    assert -0.015 <= heard_s - truncate["audio_end_ms"] / 1000 <= 0.015 + load_allowance(rec)
    assert session.of_type("conversation.item.truncated", sent=True)
    assert not session.of_type("error", sent=True)
    assert_transcript_cut_at(rec, offset, script["text"])
    kinds = event_kinds(rec)
    assert kinds.count("speech_started") == 2 and "truncate" in kinds


# --- the protocol the adapter speaks -----------------------------------------------------

@pytest.mark.asyncio
async def test_session_update_configures_pcm24k_voice_and_turn_detection(api_key):
    async with fake.FakeRealtimeServer() as server:
        model = factory(base_url=server.base_url, voice="cedar", turn_detection="semantic_vad",
                        eagerness="high", instructions="Be brief.")
        d = await StreamingDuplex.open(model, None)
        await d.push(np.zeros(int(0.1 * SAMPLE_RATE), np.float32))
        await d.close()
        session = server.sessions[0]

    assert session.path == "/v1/realtime" and session.query["model"] == ["gpt-realtime"]
    assert session.authorization == f"Bearer {api_key}"
    update = session.of_type("session.update")[0]["session"]
    pcm = {"type": "audio/pcm", "rate": 24000}
    assert update["type"] == "realtime" and update["output_modalities"] == ["audio"]
    assert update["audio"]["input"]["format"] == pcm == update["audio"]["output"]["format"]
    assert update["audio"]["output"]["voice"] == "cedar"
    assert update["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad", "eagerness": "high", "create_response": True,
        "interrupt_response": True}
    assert update["instructions"] == "Be brief."
    appends = session.of_type("input_audio_buffer.append")
    # 20 ms chunks, less the resampler's 4 ms lookahead (held back until more input comes)
    assert sum(a["audio_ms"] for a in appends) == pytest.approx(100 - LOOKAHEAD_MS)
    assert [round(a["audio_ms"]) for a in appends] == [16, 20, 20, 20, 20]


def test_default_turn_detection_is_the_providers_server_vad(api_key):
    td = factory().session_config()["audio"]["input"]["turn_detection"]
    assert td == {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                  "silence_duration_ms": 500, "create_response": True,
                  "interrupt_response": True}


def test_options_arrive_as_strings_and_bad_ones_are_named(api_key):
    model = factory(vad_threshold="0.7", interrupt_response="false", noise_reduction="none")
    assert model.vad_threshold == 0.7 and model.interrupt_response is False
    assert model.noise_reduction is None
    with pytest.raises(ModelConfigError, match="unknown option.*colour"):
        factory(colour="blue")
    with pytest.raises(ModelConfigError, match="turn_detection"):
        factory(turn_detection="push_to_talk")
    with pytest.raises(ModelConfigError, match="silence_duration_ms"):
        factory(silence_duration_ms="soon")


# --- the API key -------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_missing_key_fails_at_construction_before_connecting(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with fake.FakeRealtimeServer() as server:
        with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
            factory(base_url=server.base_url)
        # the registry's check (ModelError: the registry may have re-imported the module)
        with pytest.raises(ModelError, match="OPENAI_API_KEY"):
            models.preflight("gpt-realtime", base_url=server.base_url)
        assert server.handshakes == 0
    monkeypatch.setenv("OPENAI_API_KEY", "sk-whatever")
    with pytest.raises(ModelConfigError, match="environment"):
        factory(api_key="sk-in-a-config-file")


@pytest.mark.asyncio
async def test_the_key_is_never_written_anywhere(api_key, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="pytest_duplexact")
    async with fake.FakeRealtimeServer() as server:
        model = model_for(server, {"answer_after_ms": 300, "speak_s": 0.3})
        rec, _, _, _ = await run_trial(model, user_clip([(0.1, 0.3)], total=1.0))
        assert server.sessions[0].authorization == f"Bearer {api_key}"  # it was used
    async with fake.FakeRealtimeServer(deny_keys=True) as server:
        with pytest.raises(ModelConfigError) as rejected:
            await StreamingDuplex.open(model_for(server), None)

    # a provider that echoes the key in an error message does not get it into the events
    echoed = OpenAIRealtimeSession(None, True)._translate(
        {"type": "error", "error": {"type": "invalid_request_error",
                                    "message": f"Incorrect API key provided: {api_key}"}})
    assert api_key not in echoed.message and "<OPENAI_API_KEY>" in echoed.message

    # everything the harness might persist about this model and run
    audio.write(tmp_path / "output.wav", rec.output)
    (tmp_path / "run.json").write_text(json.dumps({
        "model": repr(model), "config": model.session_config(), "events": rec.events,
        "transcript": [w.text for w in rec.transcript], "error": str(rejected.value),
        "echoed": echoed.message}))
    (tmp_path / "log.txt").write_text("\n".join(r.getMessage() for r in caplog.records))
    assert "HTTP 401" in str(rejected.value)
    for path in tmp_path.rglob("*"):
        assert api_key.encode() not in path.read_bytes(), f"key leaked into {path.name}"


# --- failures ----------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_connection_dropped_mid_instance_is_a_model_error(api_key):
    async with fake.FakeRealtimeServer(fake.Script(drop_after_ms=300)) as server:
        await assert_dropped_mid_instance(model_for(server), ModelError, "mid-instance")
        assert server.sessions[0].dropped


@pytest.mark.asyncio
async def test_transient_failures_are_retried_from_scratch_then_reported(api_key):
    clip = user_clip([(0.1, 0.3)], total=0.8)
    policy = RetryPolicy(max_attempts=3, backoff_base=0.01, jitter=True)

    def job(server):
        async def run():
            d = await StreamingDuplex.open(model_for(server), None)
            try:
                await d.push(clip)
            finally:
                rec = await d.close()
            return rec
        return run

    # the first connection drops mid-instance, the retry runs the instance again whole
    drop_first = lambda i: fake.Script(drop_after_ms=200 if i == 0 else None)  # noqa: E731
    async with fake.FakeRealtimeServer(script_for=drop_first) as flaky, \
            fake.FakeRealtimeServer(reject=2) as limited, \
            fake.FakeRealtimeServer(fake.Script(drop_after_ms=200)) as dead:
        results = await run_concurrently([job(flaky), job(limited), job(dead)], 3, policy)
        assert len(flaky.sessions) == 2
        assert flaky.sessions[1].input_ms == pytest.approx(800 - LOOKAHEAD_MS)
        assert limited.rejected == 2 and len(limited.sessions) == 1
        assert len(dead.sessions) == 3
    assert len(results[0].input) == len(clip) and len(results[1].input) == len(clip)
    assert isinstance(results[2], ModelError) and not isinstance(results[2],
                                                                  TransientModelError)
    assert "gave up after 3 attempts" in str(results[2])


@pytest.mark.asyncio
async def test_usage_is_kept_per_session(api_key):
    """What the report's `model` service totals for gpt-realtime: responses, audio each way
    and the provider's token counts from response.done, summed."""
    script = {"answer_after_ms": 300, "speak_s": 0.6, "text": "three short words"}
    async with fake.FakeRealtimeServer() as server:
        # on until the fake has answered (a loaded machine answers late), so the input may
        # run past the clip: it is counted as what was sent
        rec, _, _, session = await run_trial(model_for(server, script),
                                             user_clip([(0.2, 0.6)], total=1.8),
                                             until=answered(server))
    assert session.usage["responses"] == 1
    assert session.usage["audio_out_s"] == pytest.approx(0.6, abs=1e-3)
    assert len(rec.input) >= 1.8 * SAMPLE_RATE
    assert session.usage["audio_in_s"] == pytest.approx(len(rec.input) / SAMPLE_RATE,
                                                        abs=0.01)
    assert rec.usage == session.usage  # the duplex hands it to the report (usage.py)


def test_send_nowait_writes_sends_message_and_declines_when_the_socket_would_wait():
    """The send clock's path (pipelines/pacing.py): the same append message as ``send``,
    written at once; refused, with nothing sent or counted, while the socket would wait."""
    import asyncio
    from types import SimpleNamespace

    from pytest_duplexact.models.util.pcm import pcm16_array
    from tests.support.servers import ws_collector

    x = np.random.default_rng(3).uniform(-1.2, 1.2, 480).astype(np.float32)  # some clipped

    async def run():
        async with ws_collector(compression=None) as (ws, got):
            session = OpenAIRealtimeSession(SimpleNamespace(_connection=ws), True)
            assert session.input_pcm16
            await session.send(x)
            assert session.send_nowait(pcm16_array(x))
            ws.paused = True  # a full write buffer: the duplex must await send instead
            assert not session.send_nowait(pcm16_array(x))
            ws.paused = False
        return got, session.usage["audio_in_s"]

    got, audio_in_s = asyncio.run(run())
    assert len(got) == 2 and got[0] == got[1]
    assert json.loads(got[0])["type"] == "input_audio_buffer.append"
    assert audio_in_s == pytest.approx(2 * 480 / 24_000)


def test_a_chunk_the_closed_connection_refused_is_not_counted():
    """audio_in_s (what the cost is priced from) counts what was written: a chunk the closed
    connection refused raises the transient error and adds nothing."""
    import asyncio
    from types import SimpleNamespace

    from websockets.exceptions import ConnectionClosedError

    from pytest_duplexact.models.streaming_contract import TransientModelError

    class Closed:
        async def send(self, text):
            raise ConnectionClosedError(None, None)

    async def run():
        session = OpenAIRealtimeSession(SimpleNamespace(_connection=Closed()), True)
        with pytest.raises(TransientModelError, match="closed mid-instance"):
            await session.send(np.zeros(480, np.float32))
        return session.usage["audio_in_s"]

    assert asyncio.run(run()) == 0.0
