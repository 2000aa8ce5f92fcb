"""Fuzzing lychee-fd's event parser (models/lychee_fd.py ``LycheeSession._translate``, issue
32 "What to build" 2): any sequence of server events, each kind with fields right or wrong
in every way hypothesis finds (sample rates, base64, WAV headers, sizes, text), becomes
events or a model error; never an exception, never audio past the bound on one event, never
``server_url``'s password in an error. No network: each event is one call.

Needs issue 32's lychee-fd bounds (items 3 and 9); skipped on a tree without them."""

from __future__ import annotations

import base64
import io
import json
import os
import resource

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_duplexact.models.providers import lychee_fd
from pytest_duplexact.models.streaming_contract import AudioDelta, Error

if not hasattr(lychee_fd, "RATE_RANGE"):
    pytest.skip("lychee-fd's bounds on server-chosen sizes (issue 32 item 3) are not in this "
                "tree", allow_module_level=True)

EXAMPLES = int(os.environ.get("DUPLEXACT_FUZZ_EXAMPLES", "200"))
PASSWORD = "s3cr@t-LEAKCHECK"
URL = "http://bob:s3cr%40t-LEAKCHECK@127.0.0.1:7860"
MOST_AUDIO = int(lychee_fd.MAX_EVENT_S * lychee_fd.OUTPUT_RATE) + 1  # samples out of one event


def _wav(samples: int, rate: int, channels: int, subtype: str) -> str:
    buf = io.BytesIO()
    sf.write(buf, np.zeros((samples, channels), np.float32), rate, format="WAV",
             subtype=subtype)
    return base64.b64encode(buf.getvalue()).decode()


def _pcm(samples: int) -> str:
    return base64.b64encode(np.zeros(samples, "<i2").tobytes()).decode()


scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**30) | st.floats()
           | st.text(max_size=8))
rates = st.sampled_from([8_000, 16_000, 24_000, 48_000, 192_000, 1, 7_999, 192_001, 10**9,
                         0, -16_000, 16_000.5, "24000", "fast"]) | scalars
b64 = st.one_of(
    st.builds(_pcm, st.integers(0, 5_000)),
    st.sampled_from([_pcm(int(lychee_fd.MAX_EVENT_S * 24_000) + 2)]),
    st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
    st.text(max_size=12), scalars)
wavs = st.one_of(
    st.builds(_wav, st.integers(0, 4_000), st.sampled_from([1_000, 8_000, 24_000, 48_000,
                                                            192_000, 384_000]),
              st.integers(1, 10), st.sampled_from(["PCM_16", "FLOAT", "DOUBLE"])),
    b64)
texts = st.text(max_size=20) | st.just(f"auth failed for {URL}/x, password {PASSWORD}")
pcm_body = st.fixed_dictionaries({"pcm_b64": b64}, optional={"sample_rate": rates})
wav_body = st.fixed_dictionaries({"wav_b64": wavs})
text_body = st.fixed_dictionaries({}, optional={"delta": texts | scalars,
                                                "snapshot": texts | scalars})
error_body = st.fixed_dictionaries({}, optional={"error": texts | scalars, "detail": texts,
                                                 "message": scalars})
state_body = st.fixed_dictionaries({}, optional={
    "from": st.sampled_from(["L", "S", "s", ""]) | scalars,
    "to": st.sampled_from(["S", "L", "s"]) | scalars})
any_body = st.dictionaries(st.text(max_size=5), scalars, max_size=3)
raw = st.one_of(st.text(max_size=16), st.just(""), st.just("[1, 2]"),
                st.just(f"{PASSWORD} is not JSON"))
events = st.one_of(  # mostly a kind with its own fields (right or wrong), else anything
    st.tuples(st.just("audio_chunk_pcm"), pcm_body.map(json.dumps)),
    st.tuples(st.just("audio_chunk"), wav_body.map(json.dumps)),
    st.tuples(st.just("assistant_text"), text_body.map(json.dumps)),
    st.tuples(st.just("error"), error_body.map(json.dumps)),
    st.tuples(st.just("state_change"), state_body.map(json.dumps)),
    st.tuples(st.sampled_from(["audio_interrupt", "done", "heartbeat"]) | st.text(max_size=10),
              any_body.map(json.dumps) | raw),
    st.tuples(st.sampled_from(["audio_chunk", "audio_chunk_pcm", "error"]), raw))


def test_any_event_sequence_becomes_events_or_a_model_error(monkeypatch):
    monkeypatch.setattr(lychee_fd, "client", lambda **_: None)  # no HTTP: one call an event
    model = lychee_fd.factory(server_url=URL)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kinds: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(events, min_size=1, max_size=6))
    def run(sequence):
        session = lychee_fd.LycheeSession(model)
        for kind, data in sequence:
            out = session._translate(kind, data)
            assert isinstance(out, list)
            for ev in out:
                kinds[type(ev).__name__] = kinds.get(type(ev).__name__, 0) + 1
                if isinstance(ev, Error):
                    assert PASSWORD not in ev.message and "s3cr%40t" not in ev.message, \
                        ev.message
                if isinstance(ev, AudioDelta):
                    assert ev.audio.ndim == 1 and len(ev.audio) <= MOST_AUDIO

    run()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(f"lychee-fd fuzz: {EXAMPLES} sequences, events {kinds}; peak RSS +{grown >> 20} MiB")
    assert grown < 1 << 30
    assert kinds.get("AudioDelta") and kinds.get("Error")  # both sides were reached
