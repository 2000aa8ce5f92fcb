"""``--duplexact-model=raon-speechchat``: the real client (models/raon_speechchat.py over
models/bridge.py) against a fake of Raon's gateway speaking its framing
(tests/fakes/raon_gateway.py). Streaming at 1x: short trials."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.raon_speechchat import RaonSpeechChat
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex, run_with_retry
from pytest_duplexact.remote.retry import RetryPolicy
from tests.fakes.raon_gateway import DEMO_NAME, FakeRaonGateway, Script, demo_tls
from tests.pipelines.helpers import cat, gap, spans, tone
from tests.support.builders import make_instance
from tests.support.realtime import load_allowance

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
    # frame 5 (0.4 s) is answered once it has all arrived: 0.48 s, plus the loop (and the
    # stalls it measured: the fake runs in this loop, so a loaded machine only adds those)
    late = load_allowance(rec)
    assert 0.4 <= onset < 0.48 + 0.4 + late, (onset, late)
    assert abs(rec.transcript[0].start - onset) < 0.1
    # each word lasts its 2 frames (0.16 s) on the playback clock: never less; more only by a
    # gap a stall opened between the frames' arrivals
    gap_s = rec.transcript[1].start - rec.transcript[0].start
    assert 0.16 - 0.05 <= gap_s <= 0.16 + 0.05 + late, (gap_s, late)


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", [Script(decode_error_at_frame=4), Script(close_at_frame=4)])
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


# --- a busy gateway: "no workers available" is waited out (issue 30 item 7) ----------------

@pytest.mark.asyncio
async def test_no_workers_available_is_waited_out_until_a_worker_is_free(instance):
    async with FakeRaonGateway(Script(), capacity=1) as gw:
        model = resolve_model("raon-speechchat", url=gw.url)
        info = SessionInfo(instance, seed=1)
        first = await model.connect(info)
        second = asyncio.create_task(model.connect(info))
        while gw.rejected == 0:  # the gateway refused the second session at least once
            await asyncio.sleep(0.05)
        assert not second.done()  # it waits; it does not fail
        await first.close()
        await (await second).close()
    assert len(gw.sessions) == 2 and gw.most_at_once == 1 and gw.rejected >= 1


@pytest.mark.asyncio
async def test_a_gateway_full_past_ready_timeout_says_what_to_do(instance):
    async with FakeRaonGateway(Script(), capacity=0) as gw:
        model = resolve_model("raon-speechchat", url=gw.url, ready_timeout="1")
        with pytest.raises(TransientModelError, match=r"no worker free within 1 s "
                                                      r"\(ready_timeout.*max_sessions"):
            await model.connect(SessionInfo(instance, seed=1))
    assert gw.rejected >= 2  # it retried with back-off, not once


def test_max_sessions_caps_the_trials_in_flight():
    assert resolve_model("raon-speechchat", url="wss://gpu:8082").max_concurrency == 2
    assert resolve_model("raon-speechchat", url="wss://gpu:8082",
                         max_sessions="6").max_concurrency == 6
    with pytest.raises(ModelConfigError, match="max_sessions must be positive"):
        resolve_model("raon-speechchat", url="wss://gpu:8082", max_sessions="0")


# --- the demo's CN-only certificate (issue 30 item 6) ----------------------------------------

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="the demo makes its certificate with openssl")


@pytest.fixture
def demo_cert(tmp_path):
    return demo_tls(tmp_path)


async def _ready(gw, instance, **options):
    model = resolve_model("raon-speechchat", url=gw.url, **options)
    session = await model.connect(SessionInfo(instance, seed=1))
    await session.close()


@needs_openssl
@pytest.mark.asyncio
async def test_the_demo_certificate_verifies_with_its_server_name(instance, demo_cert):
    ctx, pem = demo_cert
    async with FakeRaonGateway(Script(), ssl_context=ctx) as gw:
        with pytest.raises(ModelError, match=r"did not verify .*server_name=") as err:
            await _ready(gw, instance, ca_file=str(pem))  # the URL's host is not in it
        assert not isinstance(err.value, TransientModelError)  # a retry cannot fix it
        await _ready(gw, instance, ca_file=str(pem), server_name=DEMO_NAME)
        await _ready(gw, instance, verify="false")
    assert len(gw.sessions) == 2 and all(s.closed_by_client for s in gw.sessions)


def test_tls_options_that_cannot_work_are_refused(monkeypatch):
    with pytest.raises(ModelConfigError, match="apply to wss:// only"):
        resolve_model("raon-speechchat", url="ws://gpu:8082", server_name=DEMO_NAME)
    with pytest.raises(ModelConfigError, match="contradict"):
        resolve_model("raon-speechchat", url="wss://gpu:8082", verify="false",
                      ca_file=__file__)
    monkeypatch.setenv("RAON_SPEECHCHAT_API_KEY", "sk-raon")
    with pytest.raises(ModelConfigError, match="not checked .verify=false"):
        resolve_model("raon-speechchat", url="wss://gpu:8082", verify="false")
