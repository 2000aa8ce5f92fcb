"""``--duplexact-model=moshi-server`` (models/moshi_server.py) against a fake of Moshi's and
PersonaPlex's ``moshi.server`` (tests/fakes/moshi_server.py: aiohttp, sphn's Ogg/Opus pages,
the lock, the handshake delay). Below the wall clock: the items and words, the options, the
preflight's lines, the lock; at 1x: one take-turn and one barge-in trial."""

from __future__ import annotations

import asyncio
import socket
import sys

import numpy as np
import pytest

from pytest_duplexact.cli.model_listing import paper_lines, render
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.moshi_server import (
    LABEL,
    MoshiServer,
    TextFrames,
    probed,
    sphn_module,
)
from pytest_duplexact.models.streaming_contract import (
    AudioDelta,
    ItemDone,
    ServerUnreachable,
    TranscriptDelta,
    TransientModelError,
)
from tests.fakes.moshi_server import FakeMoshiServer, Script
from tests.pipelines.helpers import cat, gap, spans, tone
from tests.support.realtime import load_allowance
from tests.upstream.duplex_checks import trial

pytest.importorskip("sphn")


def words_of(events) -> dict[str, str]:
    out: dict[str, str] = {}
    for ev in events:
        if isinstance(ev, TranscriptDelta):
            out[ev.item_id] = out.get(ev.item_id, "") + ev.text
    return out


# --- items and words, no clock ----------------------------------------------------------------

def test_kyutai_order_a_piece_after_its_audio_is_that_frames():
    t, pcm, evs = TextFrames(), np.zeros(1920, np.float32), []
    evs += t.audio(pcm, 0.00)        # moshi_1
    evs += t.audio(pcm, 0.08)        # moshi_2
    evs += t.piece(" hel", 0.081)    # right after moshi_2: its word
    evs += t.audio(pcm, 0.16)        # moshi_3
    evs += t.piece("lo", 0.161)      # continues the word: same item
    evs += t.audio(pcm, 0.24)
    evs += t.piece(" you", 0.241)    # a new word in moshi_4; hello is done
    assert words_of(evs) == {"moshi_2": "hello", "moshi_4": "you"}  # from the frame's start
    done = [e.item_id for e in evs if isinstance(e, ItemDone)]
    assert done == ["moshi_1", "moshi_3", "moshi_2"]  # the word's item closes at the next word
    assert [e.item_id for e in evs if isinstance(e, AudioDelta)] == \
        ["moshi_1", "moshi_2", "moshi_3", "moshi_4"]


def test_words_start_on_their_frame_on_the_playback_clock():
    from pytest_duplexact.pipelines.streaming_duplex import PlaybackBuffer

    t, pcm, play = TextFrames(), np.full(1920, 0.1, np.float32), PlaybackBuffer(24_000)
    script = [("a", 0.00), ("a", 0.08), ("p", " hel", 0.081), ("a", 0.16), ("p", "lo", 0.161),
              ("a", 0.24), ("p", " you", 0.241), ("a", 0.32)]
    for step in script:
        evs = t.audio(pcm, step[-1]) if step[0] == "a" else t.piece(step[1], step[-1])
        for ev in evs:
            if isinstance(ev, AudioDelta):
                play.add_audio(step[-1], ev.item_id, ev.audio)
            elif isinstance(ev, TranscriptDelta):
                play.add_text(ev.item_id, ev.text)
    words = play.words(1.0, final=True)
    assert [(w.text, w.start, w.end) for w in words] == [("hello", 0.08, 0.16),
                                                          ("you", 0.24, 0.32)]


def test_personaplex_order_a_piece_before_its_audio_waits_for_it():
    t, pcm, evs = TextFrames(), np.zeros(1920, np.float32), []
    evs += t.audio(pcm, 0.00)
    evs += t.piece(" hi", 0.079)     # 79 ms after moshi_1: moshi_2's, which follows
    assert not words_of(evs)
    evs += t.audio(pcm, 0.08)
    assert words_of(evs) == {"moshi_2": "hi"}


def test_a_pause_ends_the_word_and_no_text_without_native_transcript():
    t, pcm = TextFrames(), np.zeros(1920, np.float32)
    t.audio(pcm, 0.0)
    t.piece(" ok", 0.001)
    evs = t.audio(pcm, 0.08) + t.audio(pcm, 0.16)
    assert ItemDone("moshi_1") not in evs  # a piece may still continue it after a pad
    assert ItemDone("moshi_1") in t.audio(pcm, 0.24)  # two quiet frames: the word is over
    off = TextFrames(native=False)
    off.audio(pcm, 0.0)
    assert off.piece(" ok", 0.001) == []


# --- options ----------------------------------------------------------------------------------

def test_options_url_query_and_tls_rules(tmp_path):
    with pytest.raises(ModelConfigError, match="no server. Start it .*url=ws://HOST:8998"):
        MoshiServer()
    assert MoshiServer(url="http://h:8998").endpoint() == "ws://h:8998/api/chat"
    assert MoshiServer(url="https://h:8998/").endpoint() == "wss://h:8998/api/chat"
    assert MoshiServer(url="ws://h:8998").session_url() == "ws://h:8998/api/chat"
    pp = MoshiServer(url="wss://h:8998", voice_prompt="NATF0.pt", seed=7, verify=False)
    assert pp.session_url() == ("wss://h:8998/api/chat?text_prompt=&voice_prompt=NATF0.pt"
                                "&seed=7")
    for bad, match in [(dict(url="ftp://h"), "must start with"),
                       (dict(url="ws://h", verify=False), "apply to wss://"),
                       (dict(url="wss://h", ca_file=str(tmp_path / "no.pem")), "no such file"),
                       (dict(url="ws://h", max_sessions=0), "max_sessions must be positive")]:
        with pytest.raises(ModelConfigError, match=match):
            MoshiServer(**bad)
    with pytest.raises(ModelConfigError, match="unknown option"):
        resolve_model(LABEL, url="ws://h", voice="x")


def test_sphn_missing_is_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "sphn", None)
    with pytest.raises(ModelConfigError, match=r"sphn is not installed \(pip install "
                                                r"'sphn>=0.2,<0.3'\)"):
        sphn_module()


def test_listed_under_moshi_and_personaplex_with_their_start_commands():
    text, ready = render(["personaplex"])
    assert ready and "personaplex  (NVIDIA PersonaPlex" in text and "not in the paper" in text
    assert "native server: pytest --duplexact-model=moshi-server --duplexact-model-option " \
           "url=wss://HOST:8998/api/chat" in text
    assert 'start: personaplex: SSL_DIR=$(mktemp -d); python -m moshi.server --ssl "$SSL_DIR"' \
        in text
    moshi = "\n".join(paper_lines("moshi"))
    assert "native server: pytest --duplexact-model=moshi-server" in moshi
    assert "start: moshi: python -m moshi.server --hf-repo kyutai/moshiko-pytorch-bf16" in moshi


# --- the preflight's lines ------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "Traceback" not in text, text
    return text


async def probe_line(**options) -> str:
    with pytest.raises(ModelConfigError) as e:
        await asyncio.to_thread(probed, **options)
    return one_line(e.value)


@pytest.mark.asyncio
async def test_preflight_not_running_and_a_good_probe():
    line = await probe_line(url=f"ws://127.0.0.1:{free_port()}")
    assert "not running: nothing answers at ws://127.0.0.1:" in line
    async with FakeMoshiServer(handshake_delay_s=0.05) as srv:
        p = await asyncio.to_thread(probed, url=srv.url)
        text, ready = await asyncio.to_thread(render, ["moshi-server"], {"url": srv.url})
    assert p.description.startswith("a moshi server: handshake after")
    assert p.max_sessions == 1
    assert ready and "reachable: a moshi server: handshake after" in text  # duplexact models


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    import ssl

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server)
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return server, str(pem)


@pytest.mark.asyncio
async def test_preflight_tls_mismatch_both_ways_and_an_untrusted_certificate(tls):
    server_ctx, ca_pem = tls
    async with FakeMoshiServer(ssl_context=server_ctx) as srv:
        plain = srv.url.replace("wss://", "http://")
        line = await probe_line(url=plain)
        assert "TLS mismatch: the server at ws://127.0.0.1:" in line and "serves TLS" in line
        assert "use url=wss://" in line
        line = await probe_line(url=srv.url)
        assert "certificate is not trusted" in line and "ca_file=" in line
        p = await asyncio.to_thread(probed, url=srv.url, ca_file=ca_pem)
        assert p.description.startswith("a moshi server")
    async with FakeMoshiServer() as srv:
        line = await probe_line(url=srv.url.replace("ws://", "wss://"), verify="false")
        assert "TLS mismatch" in line and "does not answer TLS" in line and "use url=ws://" in line


@pytest.mark.asyncio
async def test_preflight_not_a_moshi_server():
    async with FakeMoshiServer() as srv:
        line = await probe_line(url=srv.url.replace("/api/chat", "/chat"))
    assert "not a moshi server: HTTP 404" in line and "/api/chat" in line

    from websockets.asyncio.server import serve

    async def other(ws):  # some other WebSocket server: speaks first, not the handshake
        await ws.send("hello")
        await ws.wait_closed()

    async with serve(other, "127.0.0.1", 0) as s:
        port = s.sockets[0].getsockname()[1]
        line = await probe_line(url=f"ws://127.0.0.1:{port}/api/chat")
    assert "not a moshi server: its first message" in line


@pytest.mark.asyncio
async def test_personaplex_refusals_name_the_voice_prompt_dir_and_the_seed():
    async with FakeMoshiServer(personaplex=True) as srv:
        line = await probe_line(url=srv.url, voice_prompt="NOPE.pt", text_prompt="be brief")
        assert "'NOPE.pt'" in line and "--voice-prompt-dir" in line
        line = await probe_line(url=srv.url)
        assert "does so without voice_prompt=" in line
        line = await probe_line(url=srv.url, voice_prompt="NATF0.pt", seed="3")
        assert "drop the seed option" in line
        p = await asyncio.to_thread(probed, url=srv.url, voice_prompt="NATF0.pt")
        assert p.description.startswith("a moshi server")
    assert srv.sessions[-1].query == {"text_prompt": "", "voice_prompt": "NATF0.pt"}


# --- the lock -------------------------------------------------------------------------------

async def _instance_free_connect(model):
    return await model.connect(SessionInfo(None))  # the adapter reads nothing of it


@pytest.mark.asyncio
async def test_a_second_session_waits_for_the_lock_and_is_bounded():
    async with FakeMoshiServer() as srv:
        model = resolve_model(LABEL, url=srv.url)
        first = await _instance_free_connect(model)
        second = asyncio.create_task(_instance_free_connect(model))
        await asyncio.sleep(0.2)
        assert not second.done() and len(srv.sessions) == 2  # upgraded, waiting in the lock
        p = await asyncio.to_thread(probed, url=srv.url, probe_timeout="0.2",
                                    close_timeout="0.2")  # it does not read while it waits
        assert "busy with another session" in p.description  # the preflight: a busy server
        await first.close()
        s2 = await asyncio.wait_for(second, 5)
        await s2.close()
        assert srv.most_at_once == 1
        held = await _instance_free_connect(model)
        short = resolve_model(LABEL, url=srv.url, lock_timeout="0.2", close_timeout="0.2")
        with pytest.raises(TransientModelError, match="no handshake within 0.2 s"):
            await _instance_free_connect(short)
        await held.close()


@pytest.mark.asyncio
async def test_waiting_for_the_lock_is_not_charged_to_the_watchdog(tmp_path, monkeypatch):
    from pytest_duplexact.pipelines import watchdog

    async with FakeMoshiServer() as srv:
        model = resolve_model(LABEL, url=srv.url)
        holder = await _instance_free_connect(model)  # someone else's session, 1 s more

        def watched():  # a 0.3 s --duplexact-timeout: the wait for the lock is longer
            return watchdog.run_watched(
                lambda: trial(model, tmp_path, cat(gap(0.2), tone(0.2)), observation_s=0.2),
                timeout=0.3, what="waiting", poll=0.05)

        pending = asyncio.create_task(asyncio.to_thread(watched))
        await asyncio.sleep(1.0)
        assert not pending.done()
        await holder.close()
        rec = await asyncio.wait_for(pending, 20)
    assert rec.output.size and len(srv.sessions) == 2 and srv.most_at_once == 1


@pytest.mark.asyncio
async def test_an_undecodable_opus_stream_is_a_model_error():
    from websockets.asyncio.server import serve

    async def broken(ws):  # the handshake, then a page that is no Ogg page
        await ws.send(b"\x00")
        await ws.send(b"\x01OggS" + bytes(60))
        await ws.wait_closed()

    async with serve(broken, "127.0.0.1", 0) as s:
        port = s.sockets[0].getsockname()[1]
        session = await _instance_free_connect(resolve_model(LABEL, url=f"ws://127.0.0.1:{port}"))
        with pytest.raises(ModelError, match="Ogg/Opus stream does not decode"):
            async for _ in session.events():
                pass
        await session.close()


@pytest.mark.asyncio
async def test_a_server_gone_mid_run_is_unreachable():
    model = resolve_model(LABEL, url=f"ws://127.0.0.1:{free_port()}")
    with pytest.raises(ServerUnreachable, match="not running"):
        await _instance_free_connect(model)


# --- at 1x: the framing, a take-turn, a barge-in -----------------------------------------------

@pytest.mark.asyncio
async def test_take_turn_end_to_end(tmp_path):
    script = Script(text="sure I can help", word_frames=2)
    async with FakeMoshiServer(script, handshake_delay_s=0.1) as srv:
        model = resolve_model(LABEL, url=srv.url)
        rec = await trial(model, tmp_path, cat(gap(0.2), tone(0.4)), observation_s=1.0)
    (s,) = srv.sessions
    assert s.closed is not None and s.answers
    # the web client's framing: 20 ms Opus frames two to a page, so two pages per Mimi frame
    assert abs(s.pages_in - 2 * s.frames_in) <= 2, (s.pages_in, s.frames_in)
    assert [w.text for w in rec.transcript] == ["sure", "I", "can", "help"]
    (onset, end), *_ = spans(rec.output)
    answered = s.answers[0] * 0.08  # the input frame the fake began its reply at
    late = load_allowance(rec)
    # that frame's audio leaves once its input arrived (its end): 80 ms, plus the 40 ms page,
    # Opus and the loop
    assert answered - 0.01 <= onset <= answered + 0.08 + 0.1 + late, (onset, answered, late)
    assert abs(rec.transcript[0].start - onset) <= 0.03  # the word on its frame
    assert abs((end - onset) - 4 * 2 * 0.08) <= 0.05 + late


@pytest.mark.asyncio
async def test_barge_in_the_fake_stops_on_overlap(tmp_path):
    script = Script(text="one two three four five six", word_frames=2)
    user = cat(gap(0.2), tone(0.3), gap(0.75), tone(0.3))  # speaks again over the reply
    async with FakeMoshiServer(script) as srv:
        rec = await trial(resolve_model(LABEL, url=srv.url), tmp_path, user, observation_s=0.6)
    (s,) = srv.sessions
    assert s.stops, "the fake never heard the overlap"
    again = s.answers[1] * 0.08 if len(s.answers) > 1 else float("inf")  # its next turn
    words = [w.text for w in rec.transcript if w.start < again]
    whole = script.text.split()
    assert 0 < len(words) < len(whole) and words == whole[:len(words)], words
    first = spans(rec.output)[0]
    assert first[1] - first[0] < len(whole) * 2 * 0.08 - 0.1  # cut short
