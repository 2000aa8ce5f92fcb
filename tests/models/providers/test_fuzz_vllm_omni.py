"""Fuzzing vllm-omni's event stream: hostile servers that echo the key and the URL's password
escaped, half escaped or split across deltas, flood, send huge, nested or binary messages,
events outside the protocol, and absurd capabilities.

Hypothesis drives the REAL adapter code: one event at a time through ``_recv`` and
``translate`` (below the wall clock), and whole sessions through the streaming duplex against
a hostile WebSocket server on 127.0.0.1 (``tests/fakes/hostile_vllm.py``) with small
deadlines and bounds. The properties: nothing escapes but the adapter's ``ModelError`` or a
recording; no session outlives its deadlines; no key, password or Basic header is in any
event, word, recording or message. One plugin run end to end against the echoing server in
a process of its own, then every file it wrote and its terminal output searched for them.

CI runs a bounded, derandomized number of examples (a few seconds per property). A longer
campaign: ``DUPLEXACT_FUZZ_EXAMPLES=2000 python -m pytest tests/models/test_fuzz_vllm_omni.py``
(every property then runs that many examples, with fresh random seeds;
``benchmarks/fuzz_vllm_omni.py`` runs it and prints the counts and the peak RSS).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.bridges import wire
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.providers.vllm_omni import Deployment, VllmOmni, VllmOmniSession
from pytest_duplexact.models.streaming_contract import AudioDelta, Error, Note, TranscriptDelta
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from pytest_duplexact.remote import netsafety
from tests.fakes.hostile_vllm import CAPS, HostileVllm, created, escaped, half_escaped
from tests.fakes.hostile_ws import Inbox
from tests.support.fuzzing import fuzz
from tests.support.servers import child

KEY = "sk-fuzz-DUPLEXACT-0123456789abcdef"
USER, PASSWORD = "alice", "hunter2-Fz"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
LEAKS = (KEY, PASSWORD, BASIC)

@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("VLLM_OMNI_API_KEY", KEY)
    netsafety.remember_url_credentials(f"ws://{USER}:{PASSWORD}@127.0.0.1:1/")


def no_leak(text: str) -> None:
    assert not any(leak in text for leak in LEAKS), text


# --- what a hostile server says ----------------------------------------------------------------

SECRETS = [KEY, f"Bearer {KEY}", f"Basic {BASIC}", PASSWORD,
           f"ws://{USER}:{PASSWORD}@127.0.0.1:1/x"]
echo = st.sampled_from(SECRETS).flatmap(lambda s: st.sampled_from(
    [json.dumps(s)[1:-1], escaped(s), half_escaped(s)]))  # inside a JSON string: as is, escaped
plain = st.text(max_size=12).map(lambda t: json.dumps(t)[1:-1])
word = st.one_of(echo, plain)


@st.composite
def scalar(draw) -> str:
    """One JSON value, written by hand so escapes stay escapes."""
    return draw(st.one_of(
        word.map(lambda w: f'"{w}"'), st.integers(-10**12, 10**12).map(str),
        st.sampled_from(["null", "true", "false", "1e308", "-0.5", "[]", "{}", "[1, \"x\"]"]),
        word.map(lambda w: '{"reason": "%s"}' % w)))


KINDS = ["response.output_audio.delta", "response.output_audio_transcript.delta",
         "response.speak", "response.listen", "response.done", "overlap.decision",
         "output_audio_buffer.cleared", "input_audio_buffer.speech_started", "error",
         "session.expired", "session.closed", "session.resync_required", "rate_limits.updated",
         "unknown.kind"]
FIELDS = ["response_id", "item_id", "delta", "reason", "action", "policy", "response",
          "status", "status_details", "error", "sample_rate_hz", "format", "server_event_seq",
          "message", "code"]


@st.composite
def event(draw) -> str:
    kind = draw(st.sampled_from(KINDS))
    fields = draw(st.dictionaries(st.sampled_from(FIELDS), scalar(), max_size=5))
    if kind == "response.output_audio.delta" and draw(st.booleans()):
        n = draw(st.integers(0, 2_400)) * 2 + draw(st.integers(0, 1))  # odd: half a sample
        fields["delta"] = '"%s"' % base64.b64encode(bytes(n)).decode()
        fields.setdefault("response_id", '"r1"')
    if kind == "response.done" and draw(st.booleans()):
        status = draw(st.sampled_from(["cancelled", "failed", "completed", "x"]))
        fields["response"] = ('{"id": "r1", "status": "%s", "status_details": {"reason": "%s"}}'
                              % (status, draw(word)))
    body = ", ".join(f'"{k}": {v}' for k, v in fields.items())
    return '{"type": "%s"%s}' % (kind, ", " + body if body else "")


def nested(depth: int) -> str:
    return '{"type": "overlap.decision", "reason": ' + "[" * depth + "]" * depth + "}"


message = st.one_of(
    event(), event(), event(),
    st.binary(max_size=64),                                      # a binary frame
    st.text(max_size=40),                                        # not JSON
    st.sampled_from(["[]", "null", '"x"', "1"]),                  # JSON, not an object
    st.integers(1, 200_000).map(nested),                          # nested, up to past the parser
    st.integers(1, 3).map(lambda k: '{"type": "x", "pad": "%s"}' % ("A" * (k * 40_000))),  # huge
)


# --- one event at a time, below the wall clock --------------------------------------------------

def session() -> VllmOmniSession:
    m = VllmOmni(url=f"ws://{USER}:{PASSWORD}@127.0.0.1:9/v1/realtime?duplex=1")
    object.__setattr__(m, "deployment", Deployment("m", dict(CAPS), 16_000, 24_000, "pcm16"))
    s = VllmOmniSession(Inbox([]), m)
    s.deployment = m.deployment
    return s


def shown(ev) -> str:
    if isinstance(ev, Note):
        return ev.text
    if isinstance(ev, Error):
        return f"{ev.code} {ev.message}"
    if isinstance(ev, TranscriptDelta):
        return ev.text  # a piece: the key may be split, joined and scrubbed by the duplex
    return ""


@fuzz(100)
@given(st.lists(message, min_size=1, max_size=8))
def test_each_event_becomes_events_or_a_model_error_and_shows_no_secret(raws):
    s = session()
    s._ws = Inbox(raws)

    async def main():
        out = []
        for _ in raws:
            try:
                msg = await s._recv()
                out += s.translate(msg)
            except ModelError as e:
                no_leak(str(e))
                return out
        return out

    try:
        out = asyncio.run(main())
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as e:
        # translate is the pure part: events() turns these into one ModelError; the same
        # malformed event must never carry a secret in what it raises
        no_leak(str(e))
        return
    for ev in out:
        if isinstance(ev, AudioDelta):
            assert ev.audio.dtype == np.float32
        elif not isinstance(ev, TranscriptDelta):
            no_leak(shown(ev))


# --- whole sessions against a hostile server ----------------------------------------------------

absurd_caps = st.one_of(st.just(CAPS), st.fixed_dictionaries({}, optional={
    "implementation_level": st.sampled_from(["model_native_duplex", "x", 5]),
    "supports_barge_in": st.one_of(st.booleans(), st.integers()),
    "supports_playback_ack": st.one_of(st.booleans(), st.none()),
    "chunk_period_ms": st.one_of(st.integers(-5, 10**12), st.floats(allow_nan=True)),
    "max_sessions": st.one_of(st.integers(-5, 10**18), st.text(max_size=3)),
    "supports_multi_session": st.booleans()}))
absurd_audio = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "input": st.fixed_dictionaries({"sample_rate_hz": st.sampled_from(
        [16_000, 8_000, 192_000, 2_000_000_000, 1, 0, -16_000, 7_999, 192_001])}),
    "output": st.fixed_dictionaries({"sample_rate_hz": st.sampled_from(
        [24_000, 48_000, 10**9, 3])})}))

OUTER_S = 8.0  # no session may outlive this, whatever the server does


async def run_session(server: HostileVllm) -> tuple[object, BaseException | None]:
    m = VllmOmni(url=server.url.replace("ws://", f"ws://{USER}:{PASSWORD}@"),
                 connect_timeout=2.0, close_timeout=0.5)

    async def trial():
        duplex = await StreamingDuplex.open(m, SessionInfo(instance=None, seed=1))
        try:
            for _ in range(4):
                await duplex.push(np.zeros(1_600, np.float32))
            await asyncio.sleep(0.05)
        finally:
            return await duplex.close()

    try:
        return await asyncio.wait_for(trial(), OUTER_S), None
    except ModelError as e:
        return None, e


@fuzz(10)
@given(st.lists(message, max_size=10), absurd_caps, absurd_audio, st.integers(0, 1))
def test_sessions_against_a_hostile_server_end_within_deadlines_and_leak_nothing(
        plan, caps, audio, flood):
    if flood:  # past the bound on events per second: the server's error, named
        plan = plan + ['{"type": "response.listen"}'] * (wire.MAX_EVENTS_PER_S + 1)

    async def main():
        async with HostileVllm(plan, after=2, created_message=created(caps, audio)) as server:
            return await run_session(server)

    old = wire.MAX_MESSAGE
    wire.MAX_MESSAGE = 1 << 16  # the bound in small: a 120 KB message passes it
    try:
        recording, failure = asyncio.run(main())
    finally:
        wire.MAX_MESSAGE = old
    if failure is not None:  # the server's error in words, never the machine's
        no_leak(str(failure))
        assert "free the machine" not in str(failure)
        return
    no_leak(repr(recording.events) + repr(recording.transcript))


# --- the plugin end to end: every written file and the terminal output --------------------------

def test_a_run_against_a_server_echoing_every_secret_writes_none_of_them(pytester):
    env = {**os.environ, "VLLM_OMNI_API_KEY": KEY}
    with child("hostile_vllm.py", env=env) as fake:
        url = f"ws://{USER}:{PASSWORD}@127.0.0.1:{fake.port}/v1/realtime?duplex=1"
        res = pytester.runpytest_subprocess(
            "--duplexact-model=vllm-omni", f"--duplexact-model-option=url={url}",
            "--duplexact-condition=take_turn.immediate", "--duplexact-limit=1",
            "--duplexact-run-dir=run", "--junitxml=junit.xml", "-rA", "--tb=long", "-l",
            "--duplexact-timing-tolerance=off", "-p", "no:cacheprovider", timeout=240)
    out = res.stdout.str() + res.stderr.str()
    report = json.loads(Path(pytester.path, "run", "report.json").read_text())
    assert report["totals"]["errors"] == 1, out  # lost once (retried), then a final error
    assert "invalid_request" in out
    written = [p for p in Path(pytester.path).rglob("*") if p.is_file()]
    assert any(p.name == "junit.xml" for p in written) and len(written) > 5
    for leak in LEAKS:
        assert leak not in out, leak
        for path in written:
            assert leak.encode() not in path.read_bytes(), (leak, path)
