"""JudgeClient over the real openai SDK against the fake server: request shape, retries,
failure semantics and counters."""

from __future__ import annotations

import json

import pytest

from pytest_duplexact.judges import ConfigError, JudgeClient, RetryPolicy
from pytest_duplexact.judges.client import YES_NO_SCHEMA
from tests.fakes import Content, Disconnect, Fail, Hang, JsonReply, Refusal, Reply
from tests.judges.judgekit import FAKE_KEY, FAST, HANG_S, HANG_TIMEOUT


@pytest.fixture
def judge(openai_server, fake_key, sleeps):
    return JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps)


def test_sends_the_exact_prompt_with_a_strict_json_schema(judge, openai_server):
    openai_server.script(Reply("NO", "It ignores the later user content."))
    ans = judge.ask_yes_no("SYSTEM TEXT", "USER TEXT")
    assert ans.verdict is False and ans.reason == "It ignores the later user content."
    assert ans.error is None and not ans.cached
    (req,) = openai_server.chat_requests
    assert req.json["model"] == "gpt-5.4"
    assert req.json["messages"] == [{"role": "system", "content": "SYSTEM TEXT"},
                                    {"role": "user", "content": "USER TEXT"}]
    fmt = req.json["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == YES_NO_SCHEMA
    assert req.headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert judge.counters.as_dict() == {"requests": 1, "calls": 1, "cache_hits": 0,
                                        "errors": 0, "retries": 0, "invalid_answers": 0,
                                        "input_tokens": 10, "output_tokens": 5}  # as billed


def test_yes_is_a_true_verdict(judge, openai_server):
    openai_server.script(Reply("YES", "On topic."))
    assert judge.ask_yes_no("s", "u").verdict is True


def test_model_and_base_url_fall_back_to_the_environment(openai_server, fake_key, monkeypatch):
    monkeypatch.setenv("DUPLEXACT_JUDGE_MODEL", "judge-from-env")
    monkeypatch.setenv("DUPLEXACT_JUDGE_BASE_URL", openai_server.url)
    judge = JudgeClient(policy=FAST)
    assert judge.model == "judge-from-env"
    assert judge.ask_yes_no("s", "u").verdict is True
    assert openai_server.chat_requests[0].json["model"] == "judge-from-env"
    assert JudgeClient("explicit", base_url=openai_server.url).model == "explicit"


def test_no_key_is_a_configuration_error_naming_the_variable():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        JudgeClient(base_url="http://127.0.0.1:9/v1")


def test_429_is_retried_honouring_retry_after_within_the_cap(judge, openai_server, sleeps):
    openai_server.script(Fail(429, retry_after=0.03), Fail(429, retry_after=30), Reply())
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is True
    assert sleeps == [0.03, FAST.retry_after_cap]
    assert openai_server.count == 3
    assert judge.counters.calls == 3 and judge.counters.retries == 2
    assert judge.counters.errors == 0


def test_5xx_and_dropped_connections_back_off_exponentially(openai_server, fake_key, sleeps):
    policy = RetryPolicy(max_attempts=4, backoff_base=0.01, backoff_cap=0.03,
                         timeout=FAST.timeout)  # no attempt may time out: only the script fails
    judge = JudgeClient(base_url=openai_server.url, policy=policy, sleep=sleeps)
    openai_server.script(Fail(500), Disconnect(), Fail(503), Reply("NO", "x"))
    assert judge.ask_yes_no("s", "u").verdict is False
    assert sleeps == [0.01, 0.02, 0.03]  # doubling, capped


def test_a_hanging_server_times_out_and_is_retried(openai_server, fake_key, sleeps):
    # the retry rebuilds the client, and a loaded CI machine once took longer than 0.2 s for
    # that plus a scripted local reply: the limit is one only the hang reaches (judgekit)
    policy = RetryPolicy(max_attempts=2, backoff_base=0.0, timeout=HANG_TIMEOUT)
    judge = JudgeClient(base_url=openai_server.url, policy=policy, sleep=sleeps)
    openai_server.script(Hang(HANG_S), Reply("YES", "fine"))
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is True and judge.counters.calls == 2


@pytest.mark.parametrize("bad", [
    Content("YES"),                                   # not JSON
    Content('{"answer": "YES", "reason": "ok"'),      # truncated JSON
    JsonReply({"answer": "MAYBE", "reason": "?"}),    # outside the enum
    JsonReply({"answer": "yes", "reason": "ok"}),     # case matters
    JsonReply({"answer": "YES"}),                     # missing reason
    JsonReply({"answer": "NO", "reason": "x", "score": 3}),  # extra key
    JsonReply(["YES"]),                               # not an object
    Content(None),                                    # no content
    Refusal(),
])
def test_unusable_answers_are_retried_then_a_judge_error_never_yes_or_no(judge, openai_server,
                                                                         bad):
    openai_server.script(*[bad] * FAST.max_attempts)
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is None
    assert ans.error.startswith("judge gpt-5.4: no usable answer after 3 attempt(s)")
    assert openai_server.count == 3
    assert judge.counters.invalid_answers == 3 and judge.counters.errors == 1


def test_an_unusable_answer_then_a_good_one_succeeds(judge, openai_server):
    openai_server.script(Content("not json"), Reply("NO", "contradicts"))
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is False and judge.counters.invalid_answers == 1


def test_client_errors_are_not_retried_and_leak_no_key(judge, openai_server):
    openai_server.script(Fail(401, message=f"Incorrect API key provided: {FAKE_KEY[:8]}***"))
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is None and "HTTP 401" in ans.error and "not retried" in ans.error
    assert "sk-FAKE" not in ans.error
    assert openai_server.count == 1 and judge.counters.retries == 0


def test_exhausted_retries_report_the_last_failure(judge, openai_server):
    openai_server.script(Fail(500), Fail(502), Fail(429))
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is None and "HTTP 429" in ans.error
    assert judge.counters.as_dict() == {"requests": 1, "calls": 3, "cache_hits": 0,
                                        "errors": 1, "retries": 2, "invalid_answers": 0}
    # failed calls bill nothing: no token counts at all


def test_extra_params_are_sent(openai_server, fake_key):
    judge = JudgeClient(base_url=openai_server.url, policy=FAST, params={"temperature": 0})
    judge.ask_yes_no("s", "u")
    assert openai_server.chat_requests[0].json["temperature"] == 0


def test_repr_never_shows_the_key(judge):
    assert FAKE_KEY not in repr(judge) and FAKE_KEY not in json.dumps(judge.counters.as_dict())


def test_tokens_are_billed_for_unusable_answers_and_not_for_cache_hits(openai_server,
                                                                      fake_key, sleeps, cache):
    judge = JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps, cache=cache)
    openai_server.script(Content("not json"), Reply("YES", "ok"))
    assert judge.ask_yes_no("s", "u").verdict is True
    c = judge.counters.as_dict()
    assert (c["calls"], c["input_tokens"], c["output_tokens"]) == (2, 20, 10)
    again = JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps, cache=cache)
    assert again.ask_yes_no("s", "u").cached
    assert "input_tokens" not in again.counters.as_dict()  # a cache hit costs nothing
