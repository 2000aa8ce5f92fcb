"""The whisper-1 Transcriber over the real SDK against the fake server."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.judges import RequestCache
from pytest_duplexact.listen.transcribe import Transcriber
from pytest_duplexact.listen.transcribe_openai import OpenAITranscriber, TranscriptionError
from tests.fakes import Fail, Hang, Transcript
from tests.judges.judgekit import FAST, HANG_S, HANG_TIMEOUT

SPEECH = 0.1 * np.sin(np.linspace(0, 2000, 16000)).astype(np.float32)  # 1 s


@pytest.fixture
def asr(openai_server, fake_key, sleeps):
    return OpenAITranscriber(base_url=openai_server.url, policy=FAST, sleep=sleeps)


def test_is_a_transcriber_with_a_stable_name(asr):
    assert isinstance(asr, Transcriber) and asr.name == "openai:whisper-1"


def test_word_timestamps_request_and_result(asr, openai_server):
    openai_server.script(Transcript([("Hello", 0.1, 0.4), ("there.", 0.5, 0.9)]))
    out = asr.transcribe(SPEECH, 16000)
    assert out == (Word(0.1, 0.4, "Hello"), Word(0.5, 0.9, "there."))
    (req,) = openai_server.transcription_requests
    assert req.form == {"model": "whisper-1", "response_format": "verbose_json",
                        "timestamp_granularities[]": "word"}
    audio, sr = sf.read(io.BytesIO(req.files["file"]), dtype="float32")
    assert sr == 16000 and len(audio) == 16000


def test_other_rates_are_resampled_and_short_clips_padded(asr, openai_server):
    asr.transcribe(np.zeros(4800, np.float32), 48000)  # 0.1 s at 48 kHz
    asr.transcribe(np.zeros(400, np.float32), 16000)   # 25 ms: below the service minimum
    lengths = [sf.info(io.BytesIO(r.files["file"])).frames for r in openai_server.requests]
    assert lengths == [1600, 1600]
    assert all(r.status == 200 for r in openai_server.requests)


def test_empty_audio_needs_no_request(asr, openai_server):
    assert asr.transcribe(np.zeros(0, np.float32), 16000) == ()
    assert openai_server.count == 0


def test_retries_then_succeeds(openai_server, fake_key, sleeps):
    """A 429, then an attempt that hangs (abandoned at the attempt limit), then an answer: the
    limit is one that only the hang reaches, however loaded the machine (judgekit)."""
    asr = OpenAITranscriber(base_url=openai_server.url, sleep=sleeps,
                            policy=replace(FAST, timeout=HANG_TIMEOUT))
    openai_server.script(Fail(429, retry_after=0.01), Hang(HANG_S),
                         Transcript([("ok", 0.0, 0.2)]))
    assert asr.transcribe(SPEECH, 16000) == (Word(0.0, 0.2, "ok"),)
    assert asr.counters.calls == 3 and sleeps[0] == 0.01


def test_persistent_failure_raises_a_transcription_error(asr, openai_server):
    openai_server.script(*[Fail(500)] * FAST.max_attempts)
    with pytest.raises(TranscriptionError, match="whisper-1: no usable answer after 3"):
        asr.transcribe(SPEECH, 16000)
    assert asr.counters.errors == 1


def test_cached_by_audio_hash(openai_server, fake_key, tmp_path):
    cache = RequestCache(tmp_path / "c")
    for _ in range(2):
        asr = OpenAITranscriber(base_url=openai_server.url, policy=FAST, cache=cache)
        openai_server.script(Transcript([("hi", 0.0, 0.3)]))
        assert asr.transcribe(SPEECH, 16000) == (Word(0.0, 0.3, "hi"),)
    assert len(openai_server.transcription_requests) == 1
    assert asr.counters.cache_hits == 1


def test_malformed_word_lists_are_unusable_answers():
    from pytest_duplexact.listen.transcribe_openai import parse_words
    from pytest_duplexact.remote.calls import InvalidAnswer

    assert parse_words({"text": "", "words": None}) == ()
    for bad in ({"text": "hello", "words": None},
                {"text": "a", "words": [{"word": "a", "start": 0.5, "end": 0.1}]},
                {"text": "a", "words": [{"word": "a", "start": "x", "end": 1}]},
                {"text": "a", "words": [{"word": 3, "start": 0, "end": 1}]},
                {"text": "a", "words": [{"start": 0, "end": 1}]}):
        with pytest.raises(InvalidAnswer):
            parse_words(bad)


def test_a_service_that_nothing_answers_at_is_unreachable_and_one_that_answered_is_not(
        fake_key, sleeps, openai_server):
    """Every attempt refused (nothing listening): ServiceUnreachable in the error's chain, so
    the run stops after LOST_AFTER instances in a row (pytest_plugin/session.py) instead of
    spending its retries on every instance. An attempt that got an answer (a 500) is a
    failure of the service, not an unreachable one."""
    import socket

    from pytest_duplexact.pytest_plugin.session import _unreachable
    from pytest_duplexact.remote.calls import ServiceUnreachable

    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    asr = OpenAITranscriber(base_url=f"http://127.0.0.1:{port}/v1", policy=FAST, sleep=sleeps)
    with pytest.raises(TranscriptionError, match="connection error") as e:
        asr.transcribe(SPEECH, 16000)
    assert isinstance(e.value.__context__, ServiceUnreachable)
    assert _unreachable(e.value) == "service"
    openai_server.script(*[Fail(500)] * FAST.max_attempts)
    served = OpenAITranscriber(base_url=openai_server.url, policy=FAST, sleep=sleeps)
    with pytest.raises(TranscriptionError) as e:
        served.transcribe(SPEECH, 16000)
    assert _unreachable(e.value) is None
