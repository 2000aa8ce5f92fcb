"""A judge that misbehaves never hangs the run, never becomes a verdict, never shows the key:
HTML or truncated JSON with HTTP 200 is a retried unusable answer; a server that drips bytes
or hangs is cut at the attempt's total timeout and the question's deadline."""

from __future__ import annotations

import time
import traceback

import pytest

from pytest_duplexact.judges import JudgeClient, RetryPolicy
from pytest_duplexact.listen.transcribe_openai import OpenAITranscriber, TranscriptionError
from pytest_duplexact.remote import calls
from tests.fakes import Drip, Hang, Raw, Reply
from tests.judges.judgekit import FAKE_KEY, FAST, HANG_S

DRIP_BODY_S = 15.0  # what one dripped answer (300+ bytes at 20 bytes/s) would take in full

HTML = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
TRUNCATED = b'{"id": "chatcmpl-1", "object": "chat.completion", "choi'


@pytest.fixture
def judge(openai_server, fake_key, sleeps):
    return JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps)


@pytest.mark.parametrize("bad", [Raw(HTML), Raw(TRUNCATED, "application/json"),
                                 Raw(b"", "application/json")],
                         ids=["html", "truncated-json", "empty-json"])
def test_a_200_that_is_not_a_completion_is_retried(judge, openai_server, bad):
    openai_server.script(bad, Reply("NO", "fine"))
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is False and ans.error is None
    assert len(openai_server.chat_requests) == 2
    assert judge.counters.invalid_answers == 1 and judge.counters.retries == 1


def test_only_html_is_a_judge_error_never_a_verdict(judge, openai_server):
    openai_server.script(*[Raw(HTML)] * FAST.max_attempts)
    ans = judge.ask_yes_no("s", "u")
    assert ans.verdict is None and "unusable answer" in ans.error
    assert judge.counters.errors == 1 and judge.counters.calls == FAST.max_attempts


def test_a_dripping_server_is_cut_at_the_total_timeout(openai_server, fake_key, sleeps):
    policy = RetryPolicy(max_attempts=3, backoff_base=0.01, timeout=0.6, deadline=2.0)
    judge = JudgeClient(base_url=openai_server.url, policy=policy, sleep=sleeps)
    openai_server.script(Drip(interval=0.05), Drip(interval=0.05), Drip(interval=0.05))
    t0 = time.monotonic()
    ans = judge.ask_yes_no("s", "u")
    took = time.monotonic() - t0
    assert ans.verdict is None and "timed out" in ans.error
    # A 300+ byte body at 20 bytes/s would take 15 s or more per attempt; the deadline holds.
    # The bound is that body's time, not the deadline's: a loaded machine may add seconds to
    # the 2 s, never the 13 s between them.
    assert took < DRIP_BODY_S, took
    assert judge.counters.calls >= 2  # the attempt after an abandoned one gets a new client


def test_a_hanging_server_costs_at_most_the_question_deadline(openai_server, fake_key, sleeps):
    policy = RetryPolicy(max_attempts=4, backoff_base=0.01, timeout=0.4, deadline=1.0)
    judge = JudgeClient(base_url=openai_server.url, policy=policy, sleep=sleeps)
    openai_server.script(*[Hang(HANG_S)] * 4)
    t0 = time.monotonic()
    ans = judge.ask_yes_no("s", "u")
    took = time.monotonic() - t0
    assert ans.verdict is None and "deadline of 1 s reached" in ans.error
    # 0.4 s attempts in a 1 s deadline: at most three start, however slow the machine (a
    # slower one starts fewer); the hangs would last minutes, so the deadline ended it
    assert 1 <= judge.counters.calls <= 3
    assert took < HANG_S / 4, took


def test_the_transcriber_retries_an_html_200(openai_server, fake_key, sleeps):
    tr = OpenAITranscriber(base_url=openai_server.url, policy=FAST, sleep=sleeps)
    openai_server.script(*[Raw(HTML)] * FAST.max_attempts)
    import numpy as np

    with pytest.raises(TranscriptionError, match="unusable answer"):
        tr.transcribe(np.zeros(16000, dtype=np.float32), 16000)
    assert tr.counters.invalid_answers == FAST.max_attempts


def test_no_frame_of_a_failing_request_holds_the_key(openai_server, fake_key):
    """What pytest prints with --showlocals: every local of every frame, by repr."""
    judge = JudgeClient(base_url=openai_server.url, policy=FAST)

    def parse(payload):
        raise RuntimeError("a bug in a parser")

    remote = judge._remote
    with pytest.raises(RuntimeError) as info:
        calls.perform(request={"x": 1}, send=lambda: {"content": "{}"}, parse=parse,
                      cache=None, policy=FAST, counters=calls.Counters(),
                      secret=remote.secret, abandon=remote.abandon)
    exc = info.value.with_traceback(info.value.__traceback__.tb_next)  # past this test's frame
    shown = "".join(traceback.TracebackException.from_exception(
        exc, capture_locals=True).format())
    assert "secret = Secret('********')" in shown
    assert FAKE_KEY not in shown
    assert FAKE_KEY not in repr(judge) + repr(remote) + str(remote.secret)


def test_policy_rejects_a_zero_deadline():
    with pytest.raises(ValueError):
        RetryPolicy(deadline=0)
