"""minicpm-o end to end: the adapter against the fake MiniCPM-o demo duplex server
(tests/fakes/minicpm_server.py) on the wall clock. Steps are 1 s, so trials are a few
seconds long and run concurrently."""

from __future__ import annotations

import asyncio
import functools
import json
import logging

import numpy as np
import pytest

from pytest_duplexact import models
from pytest_duplexact.data import audio
from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.minicpm_o import MiniCPMOSession, factory
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.support import realtime as realtime_support
from tests.support.realtime import (
    assert_dropped_mid_instance,
    assert_transcript_cut_at,
    assert_transcript_never_ahead,
    event_kinds,
    fake,
    load_allowance,
    minicpm_fake,
    stall,
    user_clip,
)

CHUNK = 0.020
TOLERANCE = 0.040


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("MINICPM_O_API_KEY", raising=False)


def model_for(server, script=None, **options):
    if script is not None:
        options["system_prompt"] = "SCRIPT " + json.dumps(script)
    options.setdefault("force_listen_count", "1")
    return factory(server_url=server.url, **options)


run_trial = functools.partial(realtime_support.run_trial, block=0.04)


def played_end(results, t0, audio_s):
    """Where the heard audio of consecutive speak results ends: each plays from its
    arrival, or after the previous one if that is still playing."""
    end = 0.0
    for r in results:
        if not r["is_listen"]:
            end = max(r["sent_at"] - t0, end) + audio_s
    return end


TRIALS = [  # (user speech end s, answer after steps, speak steps, compute ms)
    (1.5, 0, 2, 150), (1.2, 1, 1, 250), (0.8, 0, 3, 90), (1.7, 0, 2, 320), (1.4, 1, 2, 200),
]


@pytest.mark.asyncio
async def test_onsets_and_offsets_land_within_40ms_of_the_servers_send_times():
    async with minicpm_fake.FakeMiniCPMServer() as server:
        async def trial(i, end, after, steps, compute):
            script = {"answer_after_steps": after, "speak_steps": steps, "compute_ms": compute,
                      "tag": str(i), "text": "one two three four five six"}
            total = np.ceil(end) + after + 1 + steps + 0.5
            return await run_trial(model_for(server, script), user_clip([(0.2, end)], total))

        results = await asyncio.gather(*(trial(i, *t) for i, t in enumerate(TRIALS)))
        sessions = {s.script.tag: s for s in server.sessions}

    errors = []
    for i, ((end, after, steps, _), (rec, snapshots, t0, _)) in enumerate(zip(TRIALS, results)):
        session = sessions[str(i)]
        [turn] = session.turns
        assert turn.ended == "end_of_turn" and turn.steps == steps
        # the answer comes in the step after the user's speech ended (+ answer_after_steps);
        # a loop stall (recorded by the harness, realtime_support.stall) delays the fake too
        late = load_allowance(rec)
        assert abs(turn.first_audio_at - t0 - (np.ceil(end) + after + 1)) <= 0.45 + late
        onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
        trial_errors = [onset - (turn.first_audio_at - t0),
                        offset - played_end(session.results, t0, 1.0)]
        assert np.abs(trial_errors).max() <= TOLERANCE + late, (trial_errors, late)
        errors += trial_errors
        assert_transcript_never_ahead(rec, snapshots, "one two three four five six")
        assert rec.transcript[0].start >= onset - 0.01 and rec.transcript[-1].end <= offset + 0.01
    errors = np.abs(errors)
    print(f"minicpm-o: onset/offset |error| over {len(TRIALS)} trials: median "
          f"{np.median(errors) * 1000:.1f} ms, max {errors.max() * 1000:.1f} ms; largest loop "
          f"stall {max(stall(t.record) for t in results) * 1000:.0f} ms")


BARGE_IN = {"answer_after_steps": 0, "speak_steps": 4, "audio_per_step_s": 1.5,
            "compute_ms": 150, "max_turns": 1,
            "text": "a long answer that the user is about to interrupt right now"}


@pytest.mark.asyncio
async def test_a_listen_mid_turn_cuts_playback_at_its_arrival():
    """User 0.2-1.5 s; the model answers in step 3 (~3.15 s) with 1.5 s of audio per step,
    so audio queues up; the user talks over it at 4.2 s, the step-5 result is a listen
    (~5.15 s) and playback stops there, mid-way through the second step's audio."""
    async with minicpm_fake.FakeMiniCPMServer() as server:
        clip = user_clip([(0.2, 1.5), (4.2, 4.8)], total=6.5)
        rec, _, t0, session = await run_trial(model_for(server, BARGE_IN), clip)
        truth = server.sessions[0]

    [turn] = truth.turns
    assert turn.ended == "interrupted" and turn.steps == 2
    cut = turn.cut_at - t0
    onset, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    assert abs(onset - (turn.first_audio_at - t0)) <= TOLERANCE + load_allowance(rec)
    print(f"minicpm-o barge-in: playback stopped {(offset - cut) * 1000:+.1f} ms from the "
          f"interrupting listen result (queued audio left: "
          f"{(played_end(truth.results, t0, 1.5) - cut) * 1000:.0f} ms)")
    assert played_end(truth.results, t0, 1.5) > cut + 0.5  # there was audio left to cut
    assert abs(offset - cut) <= CHUNK + 0.005 + load_allowance(rec)
    assert_transcript_cut_at(rec, offset, BARGE_IN["text"])
    kinds = event_kinds(rec)
    assert "speech_started" in kinds and "truncate" in kinds
    assert session.usage["speak_steps"] == 2


@pytest.mark.asyncio
async def test_cut_on_listen_false_lets_the_queued_audio_play_out():
    async with minicpm_fake.FakeMiniCPMServer() as server:
        clip = user_clip([(0.2, 1.5), (4.2, 4.8)], total=7.5)
        rec, _, t0, _ = await run_trial(model_for(server, BARGE_IN, cut_on_listen="false"),
                                        clip)
        truth = server.sessions[0]
    _, offset = fake.energy_bounds(rec.output, SAMPLE_RATE)
    heard_end = played_end(truth.results, t0, 1.5)
    assert abs(offset - heard_end) <= TOLERANCE + load_allowance(rec)
    assert offset > truth.turns[0].cut_at - t0 + 0.5
    assert not any(what.startswith("truncate") for _, what in rec.events)


@pytest.mark.asyncio
async def test_the_protocol_the_adapter_speaks():
    async with minicpm_fake.FakeMiniCPMServer(minicpm_fake.Script(queue_s=0.4)) as server:
        model = factory(server_url=server.url, temperature="0.5", ref_audio_path="ref.wav")
        t = asyncio.get_running_loop().time()
        d = await StreamingDuplex.open(model, None)
        assert asyncio.get_running_loop().time() - t >= 0.4  # it waited in the queue
        await d.push(user_clip([(0.2, 1.0)], total=2.5))
        rec = await d.close()
        session = server.sessions[0]

    assert session.session_id.startswith("adx_") and len(session.session_id) > 8
    prepare = session.prepare
    assert prepare["system_prompt"] == prepare["prefix_system_prompt"] \
        == "You are a helpful assistant."
    assert prepare["ref_audio_path"] == "ref.wav"
    assert prepare["config"] == {
        "generate_audio": True, "chunk_ms": 1000, "temperature": 0.5, "top_p": 0.8,
        "top_k": 20, "force_listen_count": 3, "max_new_speak_tokens_per_chunk": 20,
        "listen_prob_scale": 1.0, "ls_mode": "explicit", "sample_rate": 16000}
    chunks = [m for m in session.received if m["type"] == "audio_chunk"]
    # whole 1 s steps only (the last half second is never a step of its own); the first
    # goes out when its last 20 ms is due, as from a microphone
    assert [c["samples"] for c in chunks] == [16000, 16000]
    first = chunks[0]["t"] - session.received[0]["t"]
    assert abs(first - 0.98) <= 0.03 + load_allowance(rec)
    assert session.stopped  # close() said stop, the server freed its worker
    assert len(rec.input) == int(2.5 * SAMPLE_RATE)


@pytest.mark.asyncio
async def test_usage_counts_steps_tokens_and_audio():
    script = {"speak_steps": 2, "text": "three short words", "compute_ms": 50}
    async with minicpm_fake.FakeMiniCPMServer() as server:
        _, _, _, session = await run_trial(model_for(server, script),
                                           user_clip([(0.2, 0.8)], total=4.5))
    assert session.usage["steps"] == 4 and session.usage["speak_steps"] == 2
    assert session.usage["n_tokens"] == 2 + 3  # one per listen step, one per word spoken
    assert session.usage["audio_out_s"] == pytest.approx(2.0)
    assert session.usage["audio_in_s"] == pytest.approx(4.0)


# --- configuration, preflight, keys ------------------------------------------------------

def test_missing_server_fails_preflight_with_one_clear_message():
    with pytest.raises(ModelError, match="minicpm-o: no server.*server_url=ws://HOST:PORT"):
        models.preflight("minicpm-o")
    models.preflight("minicpm-o", server_url="ws://127.0.0.1:8006")
    models.preflight("minicpm-o", server_url="ws://gpu-box.lan:8006")  # no key: nothing to hide
    with pytest.raises(ModelError, match="unknown option.*voice"):
        models.preflight("minicpm-o", server_url="ws://127.0.0.1:1", voice="x")
    with pytest.raises(ModelError, match="step_ms"):
        models.preflight("minicpm-o", server_url="ws://127.0.0.1:1", step_ms="0")


def test_a_key_never_goes_to_a_remote_server_in_clear_text(monkeypatch):
    monkeypatch.setenv("MINICPM_O_API_KEY", "mk-secret")
    with pytest.raises(ModelError, match="refusing to send MINICPM_O_API_KEY"):
        models.preflight("minicpm-o", server_url="ws://gpu-box.lan:8006")
    models.preflight("minicpm-o", server_url="wss://gpu-box.lan")
    models.preflight("minicpm-o", server_url="ws://gpu-box.lan:8006", allow_insecure="yes")
    with pytest.raises(ModelError, match="environment"):
        models.preflight("minicpm-o", server_url="wss://x", api_key="mk")


@pytest.mark.asyncio
async def test_the_key_is_sent_and_never_written(monkeypatch, tmp_path, caplog):
    key = "mk-test-DUPLEXACT-0123456789abcdef"
    monkeypatch.setenv("MINICPM_O_API_KEY", key)
    caplog.set_level(logging.DEBUG, logger="pytest_duplexact")  # websockets DEBUG logs headers
    async with minicpm_fake.FakeMiniCPMServer(require_key=True) as server:
        rec, _, _, session = await run_trial(model_for(server, {"speak_steps": 1}),
                                             user_clip([(0.2, 0.8)], total=3.2))
        assert server.sessions[0].authorization == f"Bearer {key}"
    echoed = session._translate({"type": "error", "error": f"bad token {key}"})[0]
    assert key not in echoed.message
    monkeypatch.delenv("MINICPM_O_API_KEY")
    async with minicpm_fake.FakeMiniCPMServer(require_key=True) as server:
        with pytest.raises(ModelConfigError, match="HTTP 401") as refused:
            await StreamingDuplex.open(model_for(server), None)
    audio.write(tmp_path / "output.wav", rec.output)
    (tmp_path / "run.json").write_text(json.dumps({
        "events": rec.events, "usage": session.usage, "error": str(refused.value),
        "echoed": echoed.message,
        "model": repr(factory(server_url="ws://127.0.0.1:1"))}))
    (tmp_path / "log.txt").write_text("\n".join(r.getMessage() for r in caplog.records))
    for path in tmp_path.rglob("*"):
        assert key.encode() not in path.read_bytes(), path.name


# --- failures ----------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_dropped_connection_is_a_transient_model_error():
    async with minicpm_fake.FakeMiniCPMServer(minicpm_fake.Script(drop_after_steps=1)) as server:
        await assert_dropped_mid_instance(model_for(server), TransientModelError, "closed",
                                          total=1.6)
        assert server.sessions[0].dropped


@pytest.mark.asyncio
async def test_server_errors_and_deadlines():
    async with minicpm_fake.FakeMiniCPMServer(minicpm_fake.Script(queue_s=5)) as server:
        with pytest.raises(TransientModelError, match="no worker free within"):
            await StreamingDuplex.open(model_for(server, queue_timeout="0.3"), None)
    # a failed step or a timeout mid-instance ends the trial for a retry, never as silence
    session = MiniCPMOSession(None, factory(server_url="ws://127.0.0.1:1"), "adx_x")
    [err] = session._translate({"type": "error", "error": "Missing audio_base64"})
    assert err.fatal and err.transient and "Missing audio_base64" in err.message
    [err] = session._translate({"type": "timeout", "reason": "Pause timeout (60s)"})
    assert err.fatal and err.transient
    async with minicpm_fake.FakeMiniCPMServer() as server:
        with pytest.raises(ModelError, match="HTTP 404"):
            await StreamingDuplex.open(factory(server_url=server.url + "/nothing-here"), None)
