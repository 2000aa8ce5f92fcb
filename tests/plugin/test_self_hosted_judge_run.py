"""User level: a run judged by a self-hosted judge (the fake OpenAI-compatible server on
127.0.0.1, answering as local servers do: no ``usage``, padded and fenced JSON). S is
measured from those answers; report.json records the judge's model and the kind of server;
the terminal, the Markdown, the HTML page and report.json all mark the S rates as not
comparable with the paper's GPT-5.4."""

from __future__ import annotations

import html as html_lib
import json
import re

# The VAD's native modules, imported once (in-process pytester runs; see
# tests/report/store/test_merge_runs.py). The OpenAI SDK's too, with the HTTP transport it
# imports when a client is built: an inner run that imported them first takes them out of
# sys.modules at its end, and a later run's transport then raises exception classes the SDK's
# handlers do not catch (a raw ConnectError instead of APIConnectionError).
import openai
import silero_vad  # noqa: F401
import torch  # noqa: F401

from pytest_duplexact.cli import main as duplexact
from pytest_duplexact.report.sections.judging import SELF_HOSTED_NOTE
from tests.fakes import Content, FakeOpenAI
from tests.support.inner_runs import inner_runs_set_the_loop_scope  # noqa: F401 (a fixture)

openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1").close()  # sends nothing

# The loop-scope fixture is imported here, not in a tests/plugin conftest: test_first_day.py's
# bare-folder runs must see no asyncio ini key (tests/support/inner_runs.py).
MODEL = "qwen2.5-7b-instruct"


def _local_style(request):
    """A YES, as a local server without enforced JSON writes it."""
    return Content('\n```json\n{"answer": "YES", "reason": "keeps to the request"}\n```  \n')


def test_a_self_hosted_judge_is_recorded_and_marks_every_view(pytester, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # any non-empty key, as for vLLM
    for var in ("OPENAI_BASE_URL", "DUPLEXACT_JUDGE_BASE_URL",
                "DUPLEXACT_AUDIO_JUDGE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with FakeOpenAI(usage=False) as server:
        server.responder = _local_style
        res = pytester.runpytest("--duplexact-model=oracle",
                                 "--duplexact-condition=take_turn.delayed",
                                 "--duplexact-limit=1", f"--duplexact-judge={MODEL}",
                                 "--duplexact-audio-judge=off",
                                 f"--duplexact-judge-base-url={server.url}",
                                 "--duplexact-run-dir=run", "-p", "no:cacheprovider")
        url = server.url
        assert len(server.chat_requests) == 1
    res.assert_outcomes(passed=1)
    path = pytester.path / "run" / "report.json"
    rep = json.loads(path.read_text())
    counts = rep["summary"]["actions"]["take_turn"]["counts"]
    assert (counts["n_S"], counts["S"]) == (1, 1.0)  # the fenced YES was read
    assert rep["judges"] == {"text_judge": {"model": MODEL, "endpoint": "self-hosted",
                                            "url": url},
                             "self_hosted": True, "S_rates": SELF_HOSTED_NOTE}
    assert "input_tokens" not in rep["usage"]["text_judge"]  # the server reported none
    mark = f"S: {SELF_HOSTED_NOTE} (text judge {MODEL} at {url})"
    assert res.stdout.str().count(mark) == 2  # under the action and the condition tables

    md, page = pytester.path / "r.md", pytester.path / "r.html"
    capsys.readouterr()
    assert duplexact(["report", str(path), "--markdown", str(md), "--html", str(page),
                      "--audio", "none"]) == 0
    assert mark in capsys.readouterr().out
    assert md.read_text().count(f"> **S: {SELF_HOSTED_NOTE}") == 2
    html, note = page.read_text(), html_lib.escape(SELF_HOSTED_NOTE)
    # summary, actions, conditions, heat map; the paper's 14 models; the judges' server
    assert html.count(f"<b>S</b>: {note}") == 4
    assert f"Its S: {note}" in html
    assert f"text judge: self-hosted ({url})" in html


def test_a_judge_nothing_answers_at_stops_the_run_after_three(pytester, monkeypatch):
    """A judge's failure is a verdict (JUDGE_ERROR), not an exception: the run went on
    through every instance, each trial run (and paid for) with no S to show. The judge's
    latest request not connecting at all now counts as a remote service gone, and the run
    stops after LOST_AFTER instances in a row, naming the judge and its address."""
    import socket

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    res = pytester.runpytest("--duplexact-model=oracle", "--duplexact-action=take_turn",
                             "--duplexact-limit=5", f"--duplexact-judge={MODEL}",
                             "--duplexact-audio-judge=off", f"--duplexact-judge-base-url={url}",
                             # two refused attempts a question: a first attempt that
                             # overran a shorter deadline (building the SDK's client) would be
                             # a timeout, not a refusal
                             "--duplexact-judge-timeout=3", "--duplexact-run-dir=run",
                             "-p", "no:cacheprovider")
    out = res.stdout.str()
    assert res.ret == 2  # interrupted: a sharded job's recipe fails the shard on it
    assert f"duplexact: a remote service cannot be reached (3 instances in a row could not " \
        f"connect: judge {MODEL} at {url}: no usable answer" in out, out
    assert "check its URL and the network, then pytest --duplexact-resume=" in out
    assert res.parseoutcomes().get("errors") == 3  # the fourth instance never ran
    # each error short: the judge, its address, what the last attempt met; not the plugin's
    # own source (the fixture's whole function, printed once per instance)
    # (counted above the short summary, which on CI repeats each message whole)
    errors = out.split("short test summary info")[0]
    shown = re.findall(rf"JudgeUnavailable: judge {re.escape(MODEL)} at {re.escape(url)}: no "
                       r"usable answer after \d attempt\(s\); last: connection error", errors)
    assert len(shown) == 3, out  # the model named once, with its address
    assert "def outcome" not in out and "Traceback" not in out


def test_a_judge_that_answers_badly_does_not_stop_the_run(pytester, monkeypatch):
    """A judge that answers, even only with errors, is reachable: its instances are judge
    errors, and the run goes through them all (a retry may fix them; resume re-asks)."""
    from tests.fakes import Fail

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with FakeOpenAI(usage=False) as server:
        server.responder = lambda request: Fail(500)
        res = pytester.runpytest("--duplexact-model=oracle", "--duplexact-action=take_turn",
                                 "--duplexact-limit=2", f"--duplexact-judge={MODEL}",
                                 "--duplexact-audio-judge=off",
                                 f"--duplexact-judge-base-url={server.url}",
                                 "--duplexact-judge-timeout=0.5", "--duplexact-run-dir=run",
                                 "-p", "no:cacheprovider")
    out = res.stdout.str()
    assert "cannot be reached" not in out
    selected = int(re.search(r"(\d+) selected", out).group(1))
    assert selected > 3 and res.parseoutcomes().get("errors") == selected, out
