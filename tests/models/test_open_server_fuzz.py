"""Fuzzing the network inputs of the open-server adapters (issue 32, "What to build" 2):
lychee-fd's session answer and server-sent events, mini-omni2's multipart ``/chat`` reply.

Hypothesis drives the REAL adapter code: the event translation and mini-omni2's parts
directly (below the wall clock; the multipart reader's own fuzz is test_fuzz_mini_omni2.py),
and whole sessions against a raw hostile HTTP server on 127.0.0.1
(``tests/fakes/hostile_http.py``) with small deadlines. The properties: nothing
escapes but the adapter's own ``ModelError`` (``TransientModelError`` included) or a valid
trial; no session outlives its deadlines; every server-chosen size is bounded (a bound passed
is a model error naming it); the password of ``server_url`` is in no message and no event.

CI runs a bounded, derandomized number of examples (a few seconds per property). A longer
campaign: ``DUPLEXACT_FUZZ_EXAMPLES=5000 python -m pytest tests/models/test_open_server_fuzz.py``
(every property then runs that many examples, with fresh random seeds).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers import lychee_fd, mini_omni2
from pytest_duplexact.models.providers.lychee_fd import LycheeSession
from pytest_duplexact.models.providers.mini_omni2 import MiniOmni2Session
from pytest_duplexact.models.streaming_contract import (
    AudioDelta,
    Error,
    Event,
    ItemDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from tests.fakes.hostile_http import HostileServer, Reply, ok_json, sse
from tests.support.fuzzing import fuzz

PASSWORD = "s3cr@t"
USER = "bob"
CREDS = f"{USER}:s3cr%40t@"   # the URL's userinfo; a server may echo either form
LEAKS = (PASSWORD, "s3cr%40t")

def no_leak(text: str) -> None:
    assert not any(p in text for p in LEAKS), text


# --- what a hostile server says ----------------------------------------------------------------

junk = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                 st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
echo = st.sampled_from([PASSWORD, "s3cr%40t", f"http://{CREDS}127.0.0.1:7860/x",
                        f"auth failed for {USER}:{PASSWORD}", "CUDA out of memory"])
rates = st.one_of(st.sampled_from([8_000, 16_000, 24_000, 44_100, 48_000, 192_000, 1, 7_999,
                                   192_001, 10**9, -24_000, 0, 24_000.0, 24_000.5, "24000"]),
                  junk)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@st.composite
def wavs(draw) -> str:
    """A WAV (some rate, channels, length, sample type; now and then a FLAC), possibly
    corrupted, as base64."""
    rate = draw(st.sampled_from([8_000, 24_000, 48_000, 192_000, 1_000, 400_000]))
    channels = draw(st.integers(1, 10))
    n = draw(st.integers(0, 400))
    subtype = draw(st.sampled_from(["PCM_16", "FLOAT", "PCM_U8", "DOUBLE"]))
    buf = io.BytesIO()
    x = draw(st.sampled_from([np.zeros, np.ones]))((n, channels), np.float32)
    if subtype in ("FLOAT", "DOUBLE") and n and draw(st.booleans()):
        x[0, 0] = draw(st.sampled_from([np.nan, np.inf, 1e30]))
    container = draw(st.sampled_from(["WAV", "WAV", "WAV", "FLAC"]))
    if container == "FLAC":
        subtype = "PCM_16"
    try:
        sf.write(buf, x, rate, subtype=subtype, format=container)
    except Exception:  # a rate libsndfile will not write: a header of our own instead
        buf = io.BytesIO(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    raw = bytearray(buf.getvalue())
    cut = draw(st.one_of(st.none(), st.integers(0, len(raw))))
    if cut is not None:
        raw = raw[:cut]
    for _ in range(draw(st.integers(0, 3))):  # header bytes flipped
        if raw:
            i = draw(st.integers(0, min(len(raw), 64) - 1))
            raw[i] = draw(st.integers(0, 255))
    return b64(bytes(raw))


payloads = {
    "assistant_text": st.fixed_dictionaries({}, optional={
        "delta": st.one_of(st.text(max_size=20), echo, junk),
        "snapshot": st.one_of(st.text(max_size=30), echo, junk),
        "is_final": junk, "round_id": junk}),
    "state_change": st.fixed_dictionaries({}, optional={
        "from": st.one_of(st.sampled_from(["l", "s", "L", "S"]), junk),
        "to": st.one_of(st.sampled_from(["l", "s", "L", "S"]), junk), "interrupt": junk}),
    "audio_chunk_pcm": st.fixed_dictionaries({}, optional={
        "pcm_b64": st.one_of(st.binary(max_size=3000).map(b64), st.text(max_size=20), junk),
        "sample_rate": rates}),
    "audio_chunk": st.fixed_dictionaries({}, optional={"wav_b64": st.one_of(wavs(), junk)}),
    "error": st.fixed_dictionaries({}, optional={"error": st.one_of(echo, junk),
                                                 "detail": st.one_of(echo, junk),
                                                 "message": st.one_of(echo, junk)}),
}
for _kind in ("audio_interrupt", "status", "done", "heartbeat", "message", "", "stage"):
    payloads[_kind] = st.dictionaries(st.text(max_size=6), junk, max_size=3)


@st.composite
def events(draw) -> tuple[str, str]:
    """One (event type, data line): a payload of its kind, another kind's, or not JSON."""
    kind = draw(st.sampled_from(sorted(payloads)))
    how = draw(st.sampled_from(["own", "own", "own", "other", "raw", "json"]))
    if how == "own":
        return kind, json.dumps(draw(payloads[kind]))
    if how == "other":
        return kind, json.dumps(draw(payloads[draw(st.sampled_from(sorted(payloads)))]))
    if how == "json":
        return kind, json.dumps(draw(junk))
    return kind, draw(st.one_of(st.text(max_size=30), echo))


# --- lychee-fd: the event translation, below the wall clock -------------------------------------

LYCHEE_URL = f"http://{CREDS}127.0.0.1:7860"
MAX_SAMPLES = int(lychee_fd.MAX_EVENT_S * lychee_fd.OUTPUT_RATE) + 64


def check_events(out: list) -> None:
    for ev in out:
        assert isinstance(ev, (AudioDelta, TranscriptDelta, ItemDone, SpeechStarted, Error)), ev
        no_leak(repr(ev))
        if isinstance(ev, AudioDelta):
            assert ev.audio.ndim == 1 and 0 < len(ev.audio) <= MAX_SAMPLES
        if isinstance(ev, Error):
            assert ev.fatal and isinstance(ev.message, str) and len(ev.message) <= 600


@fuzz(300)
@given(st.lists(events(), min_size=1, max_size=12))
def test_lychee_events_are_events_errors_or_nothing(seq):
    """Any sequence of events: translated into events (each turn done at most once), never an
    exception, every error fatal and free of the URL's password, every audio piece bounded."""
    session = LycheeSession(lychee_fd.factory(server_url=LYCHEE_URL, verify="false"))
    done: list[str] = []
    for kind, data in seq:
        out = session._translate(kind, data)
        check_events(out)
        done += [ev.item_id for ev in out if isinstance(ev, ItemDone)]
    assert len(done) == len(set(done))


# --- lychee-fd: whole sessions against a hostile server -----------------------------------------

SID = b'{"session_id": "s1", "infer_window_ms": 400}'
SMALL = dict(connect_timeout="1", request_timeout="1", event_timeout="0.3")
OUTER_S = 20.0  # far past every deadline above: reaching it is a hang, never load


def sse_bytes(seq: list[tuple[str, str]]) -> bytes:
    return b"".join(f"event: {k}\ndata: {d}\n\n".encode() for k, d in seq)


async def run_lychee(route, *, pushes: int = 0, written: list | None = None
                     ) -> tuple[list, ModelError | None]:
    """One session against ``route``: start, ``pushes`` windows of input, the events until the
    stream ends; what came out and how it ended (None: a clean end)."""
    async with HostileServer(route) as server:
        url = server.url.replace("http://", f"http://{CREDS}")
        m = lychee_fd.factory(server_url=url, **SMALL)
        got: list = []
        session = None

        async def body():
            nonlocal session
            session = await m.connect(None)
            for _ in range(pushes):
                await session.send(np.zeros(6400, np.float32))
            async for ev in session.events():
                got.append(ev)
                if isinstance(ev, Error):
                    return

        try:
            await asyncio.wait_for(body(), OUTER_S)
            ended = None
        except ModelError as e:
            ended = e
        finally:
            if session is not None:
                await asyncio.wait_for(session.close(), OUTER_S)
            if written is not None:
                written.append(server.written)
        return got, ended


stream_pieces = st.one_of(
    st.lists(events(), max_size=6).map(sse_bytes),
    st.binary(max_size=200),                                        # not SSE at all
    st.text(max_size=60).map(str.encode),
    st.sampled_from([b"event: audio_chunk_pcm\ndata: {\"pcm_b64\": \"AAAA\"",  # no newline
                     b"data: " + b"x" * 5000 + b"\n\n", b":comment\n\n", b"\r\r\n\n",
                     b"event: done\ndata: {}\n\n", b"retry: x\nid: \x00\n\n"]))


@st.composite
def lychee_routes(draw):
    start = draw(st.one_of(
        st.just(ok_json(SID)),
        st.builds(lambda b: ok_json(json.dumps(b).encode()),
                  st.fixed_dictionaries({"session_id": st.one_of(st.just("s1"), junk)},
                                        optional={"infer_window_ms": st.one_of(
                                            st.sampled_from([160, 400, 0, -1, 0.5, 10**12]),
                                            junk)})),
        st.sampled_from([Reply(status=b"HTTP/1.1 503 Service Unavailable",
                               headers=(b"Content-Length: 5",), body=(b"wait!",)),
                         Reply(status=b"HTTP/1.1 200 OK", headers=(b"Content-Length: 3",),
                               body=(b"{}]",)),
                         Reply(raw_head=b"garbage\r\n\r\n"), Reply(then="abort"),
                         Reply(then="stall"), Reply(headers=(b"Content-Length: 9",),
                                                    body=(b"{",), then="stall"),
                         Reply(headers=(b"Content-Length: 100",), body=(b"{",))])))
    content_type = draw(st.sampled_from([b"text/event-stream", b"text/event-stream",
                                         b"text/plain", b"application/json"]))
    pieces = draw(st.lists(stream_pieces, max_size=5))
    then = draw(st.sampled_from(["close", "abort", "stall"]))
    stream = Reply(headers=(b"Content-Type: " + content_type,), body=pieces, then=then)
    chunk = draw(st.sampled_from([ok_json(b'{"ok": true}'), ok_json(b"[]"), Reply(then="stall"),
                                  Reply(status=b"HTTP/1.1 409 Conflict",
                                        headers=(b"Content-Length: 0",), then="keep")]))

    def route(method, path):
        if path.endswith("/start"):
            return start
        if path.endswith("/events"):
            return stream
        if path.endswith("/chunk"):
            return chunk
        return ok_json(b'{"ok": true}')
    return route


@fuzz(40)
@given(lychee_routes(), st.integers(0, 2))
def test_lychee_sessions_against_a_hostile_server(route, pushes):
    """Whatever the server answers, the session ends within its deadlines, cleanly or with a
    ``ModelError`` free of the URL's password."""
    got, ended = asyncio.run(run_lychee(route, pushes=pushes))
    check_events(got)
    if ended is not None:
        no_leak(str(ended))


# --- mini-omni2: the multipart reader, below the wall clock -------------------------------------

BOUNDARY = mini_omni2.BOUNDARY
part_heads = st.sampled_from([b"Content-Type: audio/wav\r\n\r\n", b"Content-Type: text/plain\r\n\r\n",
                              b"content-type:AUDIO/L16\r\n\r\n", b"Content-Type: image/png\r\n\r\n",
                              b"\r\n\r\n", b"X: y", b""])


@st.composite
def bodies(draw) -> bytes:
    pieces = []
    for _ in range(draw(st.integers(0, 6))):
        pieces.append(draw(st.sampled_from([BOUNDARY, BOUNDARY[:-1], b"--frame\r\n", b"\r\n"])))
        pieces.append(draw(part_heads))
        pieces.append(draw(st.one_of(st.binary(max_size=101), st.text(max_size=20)
                                     .map(lambda t: t.encode()), echo.map(str.encode))))
    return b"".join(pieces)


@fuzz(150)
@given(st.lists(st.tuples(st.sampled_from(["audio/wav", "audio/l16", "text/plain", "", "image/x"]),
                          st.binary(max_size=99)), max_size=6))
def test_mini_omni2_parts_become_bounded_events(parts):
    """Odd PCM lengths, wrong content types, invalid UTF-8: events or nothing."""
    s = MiniOmni2Session(mini_omni2.factory(server_url="http://127.0.0.1:1", verify="false"))
    s._parts("turn_1", parts)
    while not s._events.empty():
        ev = s._events.get_nowait()
        assert isinstance(ev, (AudioDelta, TranscriptDelta)), ev
        if isinstance(ev, AudioDelta):
            assert ev.audio.dtype == np.float32 and len(ev.audio) > 0


# --- mini-omni2: whole replies from a hostile server --------------------------------------------

async def run_chat(reply: Reply, server_written: list | None = None
                   ) -> tuple[list, ModelError | None]:
    async with HostileServer(lambda m, p: reply) as server:
        url = server.url.replace("http://", f"http://{CREDS}")
        s = MiniOmni2Session(mini_omni2.factory(server_url=url, connect_timeout="1",
                                                read_timeout="0.3"))
        try:
            await asyncio.wait_for(s._chat("turn_1", np.zeros(1600, np.float32)), OUTER_S)
            got = []
            while not s._events.empty():
                got.append(s._events.get_nowait())
            return [ev for ev in got if isinstance(ev, Event)], s._failure
        finally:
            await asyncio.wait_for(s.close(), OUTER_S)
            if server_written is not None:
                server_written.append(server.written)


@st.composite
def chat_replies(draw) -> Reply:
    status = draw(st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.1 500 INTERNAL SERVER ERROR",
                                   b"HTTP/1.1 503 Busy", b"HTTP/1.0 200 OK", b"HTTP/1.1 999 ?"]))
    ctype = draw(st.sampled_from([b"multipart/x-mixed-replace; boundary=frame", b"text/html",
                                  b"application/json", b"multipart/x-mixed-replace"]))
    body = draw(bodies())
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    framing = draw(st.sampled_from(["close", "length", "short", "chunked"]))
    headers = [b"Content-Type: " + ctype]
    if framing == "length":
        headers.append(b"Content-Length: %d" % len(body))
    elif framing == "short":  # more promised than sent
        headers.append(b"Content-Length: %d" % (len(body) + 10))
    elif framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        pieces = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p] + [b"0\r\n\r\n"]
    then = draw(st.sampled_from(["close", "abort", "stall"]))
    if framing == "length" and then == "close":
        then = draw(st.sampled_from(["close", "keep"]))
    return Reply(status=status, headers=tuple(headers), body=pieces, then=then)


@fuzz(40)
@given(chat_replies())
def test_mini_omni2_replies_from_a_hostile_server(reply):
    """Whatever ``/chat`` answers: the reply ends within the read deadline, as events or a
    ``ModelError`` free of the URL's password."""
    got, failure = asyncio.run(run_chat(reply))
    for ev in got:
        assert isinstance(ev, (AudioDelta, TranscriptDelta, ItemDone)), ev
    if failure is not None:
        assert isinstance(failure, ModelError)
        no_leak(str(failure))


# --- bounds a hostile server finds (each failed before its fix) ---------------------------------

FLOOD = 512  # pieces of 64 KiB: 32 MiB, far past every bound


def flood(status: bytes) -> Reply:
    return Reply(status=status, headers=(b"Content-Type: text/plain",),
                 body=(b"x" * 65536 for _ in range(FLOOD)))


@pytest.mark.asyncio
async def test_an_endless_error_page_is_read_only_up_to_its_bound():
    """A 500 whose body does not end: the error is built from its start, the rest unread."""
    written: list = []
    got, failure = await run_chat(flood(b"HTTP/1.1 500 INTERNAL SERVER ERROR"), written)
    assert isinstance(failure, ModelError) and "HTTP 500" in str(failure)
    assert written[0] < FLOOD * 65536 // 2


def test_text_parts_lose_the_urls_password():
    s = MiniOmni2Session(mini_omni2.factory(server_url=f"http://{CREDS}127.0.0.1:1"))
    s._parts("turn_1", [("text/plain", f"I heard {PASSWORD}".encode())])
    assert s._events.get_nowait().text == "I heard ***"


def test_lychee_text_loses_the_urls_password():
    session = LycheeSession(lychee_fd.factory(server_url=LYCHEE_URL, verify="false"))
    [ev] = session._translate("assistant_text", json.dumps({"delta": f"echo {PASSWORD}"}))
    assert ev.text in ("echo ***", "echo <server_url password>")  # masked, either way


@pytest.mark.parametrize("fmt", ["FLAC", "OGG"])
def test_an_audio_chunk_in_a_compressed_container_is_refused(fmt):
    """app.py sends WAV; a FLAC of 30 s x 8 channels x 192 kHz of silence is 77 KB of base64
    and took 200 MB to decode, within every other bound."""
    buf = io.BytesIO()
    sf.write(buf, np.zeros((4800, 2), np.float32), 48_000, format=fmt)
    session = LycheeSession(lychee_fd.factory(server_url=LYCHEE_URL, verify="false"))
    [ev] = session._translate("audio_chunk", json.dumps({"wav_b64": b64(buf.getvalue())}))
    assert isinstance(ev, Error) and ev.code == "bad_audio" and "not a WAV" in ev.message


def lychee_start(body: bytes):
    return lambda method, path: ok_json(body) if path.endswith("/start") else None


@pytest.mark.asyncio
@pytest.mark.parametrize("window", ['"400"', "10000000000", "50", "[400]", "NaN"])
async def test_the_servers_window_is_bounded(window):
    """infer_window_ms of the wrong type or outside 160-10,000 ms (0 samples would make the
    chunker loop forever, 10^10 ms never send): a model error naming the bound."""
    body = b'{"session_id": "s1", "infer_window_ms": %s}' % window.encode()
    got, ended = await run_lychee(lychee_start(body))
    assert isinstance(ended, ModelError) and "WINDOW_RANGE_MS" in str(ended), ended


@pytest.mark.parametrize("window", [-1, 0.001, 0, 159, 10_001, float("inf"), True])
def test_a_window_of_no_samples_or_of_hours_is_refused(window):
    """Below the clock: 0.001 ms is 0 samples and -1 ms negative (the chunker would loop
    forever, appending); 0 is falsy (ours then), so the first failure is the bound's."""
    if window == 0:
        assert lychee_fd._window_ms({"infer_window_ms": window}, 400) == 400
        return
    with pytest.raises(ModelError, match="WINDOW_RANGE_MS"):
        lychee_fd._window_ms({"infer_window_ms": window}, 400)


@pytest.mark.asyncio
async def test_an_endless_session_answer_is_refused_at_its_bound():
    written: list = []

    def route(method, path):
        return flood(b"HTTP/1.1 200 OK") if path.endswith("/start") else None
    got, ended = await run_lychee(route, written=written)
    assert isinstance(ended, ModelError) and "MAX_ANSWER_BYTES" in str(ended), ended
    assert written[0] < FLOOD * 65536 // 2


@pytest.mark.asyncio
@pytest.mark.parametrize("line", [b"data: " + b"x" * (2 << 20),            # no newline
                                  b"data: " + b"x" * (2 << 20) + b"\n\n"],
                         ids=["unterminated", "terminated"])
async def test_one_server_sent_event_is_bounded(line):
    """An event past MAX_SSE_EVENT_BYTES (or a line that never ends) is a model error naming
    the bound, not a retry: the same server would send it again."""
    def route(method, path):
        if path.endswith("/start"):
            return ok_json(SID)
        return sse(line, then="stall") if path.endswith("/events") else None
    got, ended = await run_lychee(route)
    assert isinstance(ended, ModelError) and "MAX_SSE_EVENT_BYTES" in str(ended), ended
    assert not isinstance(ended, TransientModelError)


@pytest.mark.asyncio
async def test_a_nested_gzip_bomb_stops_at_the_part_bound():
    """64 MiB of zeros gzipped twice is about 70 KB on the wire; httpx2 inflates it in
    bounded pieces, so the reader's bound is reached before the bomb is whole."""
    import gzip

    bomb = gzip.compress(gzip.compress(bytes(64 << 20), 9), 9)
    reply = Reply(headers=(b"Content-Type: multipart/x-mixed-replace; boundary=frame",
                           b"Content-Encoding: gzip, gzip", b"Content-Length: %d" % len(bomb)),
                  body=(bomb,))
    got, failure = await run_chat(reply)
    assert isinstance(failure, ModelError) and "MAX_PART_BYTES" in str(failure), failure


@pytest.mark.asyncio
@pytest.mark.parametrize("reach", [lychee_fd.reach, mini_omni2.reach],
                         ids=["lychee-fd", "mini-omni2"])
async def test_reach_reads_the_status_not_an_endless_body(reach):
    """``duplexact models NAME -o server_url=...`` needs only the status of its GET."""
    async with HostileServer(lambda m, p: flood(b"HTTP/1.1 405 METHOD NOT ALLOWED")) as server:
        said = await asyncio.to_thread(reach, server_url=server.url)
    assert "HTTP 405" in said and server.written < FLOOD * 65536 // 2


@pytest.mark.asyncio
async def test_a_server_flooding_audio_fails_the_instance_at_the_queue_bound():
    """End to end through the streaming duplex (one short run at 1x): events each within the
    per-event bound, but 700 s of them at once; the instance fails naming MAX_QUEUED_S. The
    100 s past the bound are the margin for reading them: the clock runs on meanwhile, so a
    flood read slower than its excess (610 s took over 10 s at load 20) never passed it."""
    from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex

    pcm = b64(np.zeros(10 * lychee_fd.OUTPUT_RATE, "<i2").tobytes())
    event = f'event: audio_chunk_pcm\ndata: {{"pcm_b64": "{pcm}"}}\n\n'.encode()

    def route(method, path):
        if path.endswith("/start"):
            return ok_json(SID)
        if path.endswith("/events"):
            return sse(*(event for _ in range(70)), then="stall")
        return ok_json(b'{"ok": true}')
    async with HostileServer(route) as server:
        d = await StreamingDuplex.open(lychee_fd.factory(server_url=server.url, **SMALL), None)
        # input streams on until the reader has taken enough of the flood to pass the bound
        # (how soon depends on the machine's load, not on the bound; OUTER_S is the hang)
        # (the reader's decoding stalls the loop on a loaded machine: the hang's deadline
        # allows the lateness the duplex measured, up to OUTER_S more)
        until = time.monotonic() + OUTER_S
        with pytest.raises(ModelError, match="MAX_QUEUED_S"):
            while time.monotonic() < until + min(d.lateness.worst, OUTER_S):
                await asyncio.wait_for(d.push(np.zeros(8_000, np.float32)), OUTER_S)
        with pytest.raises(ModelError):
            await d.close()
