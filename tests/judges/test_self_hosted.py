"""A self-hosted judge (vLLM, llama.cpp's server, Ollama) over the real SDK against the fake
server answering as such servers do: no ``usage``, whitespace around the JSON, the JSON in a
Markdown fence. What the judges send (docs/judges.md, "A self-hosted judge"), and which kind
of server they record."""

from __future__ import annotations

import base64
import io
import json
import wave

import numpy as np
import pytest

from pytest_duplexact.judges import AudioJudge, JudgeClient, RetryPolicy
from pytest_duplexact.judges.client import YES_NO_SCHEMA, check_object
from pytest_duplexact.remote.calls import effective_base_url, endpoint_kind
from tests.fakes import Content, FakeOpenAI

FENCED = '\n```json\n{"answer": "NO", "reason": "ignores the revision"}\n```\n'
PADDED = '  \n{"answer":"YES" ,\n "reason": "addresses the request"}\n\n'
AUDIO = ('```\n{"function": "uncertainty", "reason": "rising, hesitant"}\n```')
# One attempt with room to spare: these tests count calls, and a loaded machine must not turn
# a slow first answer into a retry.
ONE = RetryPolicy(max_attempts=1, timeout=60.0)


@pytest.fixture
def local_server():
    with FakeOpenAI(usage=False) as server:
        yield server


@pytest.mark.parametrize("text, answer", [(FENCED, "NO"), (PADDED, "YES")])
def test_fenced_and_padded_answers_are_read_and_nothing_is_billed(local_server, fake_key,
                                                                  sleeps, text, answer):
    judge = JudgeClient("qwen2.5-7b-instruct", base_url=local_server.url, policy=ONE,
                        sleep=sleeps)
    local_server.script(Content(text))
    ans = judge.ask_yes_no("system", "user")
    assert (ans.verdict, ans.error) == (answer == "YES", None)
    assert judge.counters.calls == 1 and judge.counters.invalid_answers == 0
    assert judge.counters.billed == {}  # no usage object: no tokens counted, no error
    body = local_server.chat_requests[0].json
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == YES_NO_SCHEMA
    assert (judge.endpoint, judge.endpoint_url) == ("self-hosted", local_server.url)


@pytest.mark.parametrize("text", [
    'Sure! ```json\n{"answer": "YES", "reason": "ok"}\n```',  # prose outside the fence
    '```json\n{"answer": "YES", "reason": "ok"}\n```\n```json\n{"answer": "NO", '
    '"reason": "no"}\n```',  # two answers
    '```python\n{"answer": "YES", "reason": "ok"}\n```',  # not a JSON fence
])
def test_anything_but_one_fence_around_the_whole_answer_stays_invalid(text):
    from pytest_duplexact.remote.calls import InvalidAnswer

    with pytest.raises(InvalidAnswer):
        check_object(text, YES_NO_SCHEMA)


def test_the_audio_judge_sends_a_wav_input_audio_part_and_reads_a_fenced_answer(
        local_server, fake_key, sleeps):
    judge = AudioJudge("qwen2-audio-7b-instruct", base_url=local_server.url, policy=ONE,
                       sleep=sleeps)
    local_server.script(Content(AUDIO))
    tone = (0.1 * np.sin(2 * np.pi * 200 * np.arange(8000) / 16000)).astype(np.float32)
    ans = judge.classify(tone, 16000)
    assert (ans.function, ans.error) == ("uncertainty", None)
    body = local_server.chat_requests[0].json
    assert body["modalities"] == ["text"]
    user = body["messages"][1]["content"]
    assert [p["type"] for p in user] == ["text", "input_audio"]
    assert user[1]["input_audio"]["format"] == "wav"
    with wave.open(io.BytesIO(base64.b64decode(user[1]["input_audio"]["data"]))) as w:
        assert (w.getnchannels(), w.getframerate(), w.getsampwidth(), w.getnframes()) == \
            (1, 16000, 2, 8000)
    fmt = body["response_format"]["json_schema"]
    assert fmt["strict"] and set(fmt["schema"]["properties"]) == {"function", "reason"}
    json.dumps(body)


def test_the_endpoint_kind_is_openai_only_for_openais_api(monkeypatch):
    assert endpoint_kind(None) == "openai"
    assert effective_base_url(None) == "https://api.openai.com/v1"
    assert endpoint_kind("https://api.openai.com/v1/") == "openai"
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:11434/v1",
                "https://gpu-box.example.org/v1"):
        assert endpoint_kind(url) == "self-hosted"
    # the SDK's own fallback counts, and the URL as recorded carries no credentials
    monkeypatch.setenv("OPENAI_BASE_URL", "https://me:secret@judge.lan:8443/v1/?token=x")
    assert endpoint_kind(None) == "self-hosted"
    assert effective_base_url(None) == "https://judge.lan:8443/v1"
