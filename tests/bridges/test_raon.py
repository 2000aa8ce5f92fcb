"""``--duplexact-model=raon-speechchat``: the real client (models/raon_speechchat.py over
models/bridge.py) against a fake of Raon's gateway speaking its framing
(tests/fakes/raon_gateway.py). Streaming at 1x: short trials."""

from __future__ import annotations

import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.base import ModelError, SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.raon_speechchat import RaonSpeechChat
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.streaming import StreamingDuplex, run_with_retry
from pytest_duplexact.remote.retry import RetryPolicy
from tests.fakes.raon_gateway import FakeRaonGateway, Script
from tests.pipelines.helpers import cat, gap, spans, tone
from tests.support.builders import make_instance

QUICK = RetryPolicy(max_attempts=2, backoff_base=0.0)


@pytest.fixture
def instance(tmp_path):
    return make_instance(tmp_path, "take_turn", "immediate", {"user": cat(gap(0.2), tone(0.6))},
                         {"user_start": 0.2})


async def trial(model, instance):
    async def once():
        duplex = await StreamingDuplex.open(model, SessionInfo(instance, seed=3))
        try:
            return await DirectReplay(observation_s=0.8).run(duplex, instance)
        except BaseException:
            duplex._reader.cancel()
            await duplex.session.close()
            raise

    return await run_with_retry(once, QUICK)


@pytest.mark.asyncio
async def test_a_session_with_its_query_text_and_keepalive(instance):
    async with FakeRaonGateway(Script()) as gw:
        model = resolve_model("raon-speechchat", url=gw.url, temperature="0.5",
                              system_prompt_style="raon")
        assert (model.input_sample_rate, model.chunk_ms) == (24_000, 20)
        rec = await trial(model, instance)
    (s,) = gw.sessions
    assert s.query["prompt"] == "eng:full_duplex:listen-first"
    assert (s.query["temperature"], s.query["top_k"], s.query["system_prompt_style"]) == \
        ("0.5", "50", "raon")
    assert s.query["trial_id"] == instance.id and s.query["run_seed"] == "3"
    assert s.pongs == 1 and s.closed_by_client
    assert [w.text for w in rec.transcript] == ["sure", "I", "can", "help", "with", "that"]
    onset = spans(rec.output)[0][0]
    # frame 5 (0.4 s) is answered once it has all arrived: 0.48 s, plus the loop
    assert 0.4 <= onset < 0.48 + 0.4, onset
    assert abs(rec.transcript[0].start - onset) < 0.1
    # each word lasts its 2 frames (0.16 s) on the playback clock
    assert rec.transcript[1].start - rec.transcript[0].start == pytest.approx(0.16, abs=0.05)


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", [Script(decode_error_at_frame=4), Script(reject=True),
                                   Script(close_at_frame=4)])
async def test_a_gateway_failure_is_transient_and_retried(instance, fault):
    async with FakeRaonGateway(fault, Script()) as gw:
        rec = await trial(resolve_model("raon-speechchat", url=gw.url), instance)
    assert len(gw.sessions) == 2 and rec.transcript


@pytest.mark.asyncio
async def test_failing_every_time_is_an_error_naming_the_gateway(instance):
    async with FakeRaonGateway(Script(close_at_frame=2)) as gw:
        with pytest.raises(ModelError, match=r"raon-speechchat: the server ended the trial "
                                             r"before its end \(CLOSE\) \(overloaded_backlog\)"
                                             r" \(gave up after 2 attempts\)"):
            await trial(resolve_model("raon-speechchat", url=gw.url), instance)


@pytest.mark.asyncio
async def test_without_the_native_transcript_the_text_is_left_to_the_transcriber(instance):
    async with FakeRaonGateway(Script()) as gw:
        rec = await trial(resolve_model("raon-speechchat", url=gw.url,
                                        native_transcript="false"), instance)
    assert rec.transcript == () and spans(rec.output)


def test_options():
    assert RaonSpeechChat(url="https://gpu:8082").endpoint() == "wss://gpu:8082/ws/chat"
    assert RaonSpeechChat(url="wss://gpu:8082/fd-demo/ws/chat").endpoint() == \
        "wss://gpu:8082/fd-demo/ws/chat"
    with pytest.raises(ModelConfigError, match="no gateway"):
        resolve_model("raon-speechchat")
    with pytest.raises(ModelConfigError, match="unknown option.s. temp;"):
        resolve_model("raon-speechchat", url="wss://gpu:8082", temp="1")


@pytest.mark.asyncio
async def test_duplexact_models_says_whether_the_gateway_answers(capsys):
    import asyncio

    from pytest_duplexact.cli import main

    async with FakeRaonGateway(Script()) as gw:
        rc = await asyncio.to_thread(main, ["models", "raon-speechchat", "-o", f"url={gw.url}"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "reachable: an empty READY (Raon's gateway)" in out
    assert len(gw.sessions) == 1 and gw.sessions[0].closed_by_client  # one session, ended
