"""A judged run through the plugin, against the fake OpenAI server on 127.0.0.1: S is
measured, the report states models and calls, a re-score of the recordings with the warm
cache makes zero requests and gives the same verdicts, and no key is written anywhere.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes import FakeOpenAI
from tests.support.inner_runs import as_user

inproc = as_user()

KEY = "sk-test-JUDGE-never-written-9876543210"


def test_judged_run_then_cached_rescore(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    common = ["--duplexact-action=take_turn,backchannel", "--duplexact-limit=1",
              "--duplexact-judge=gpt-5.4", "--duplexact-cache-dir=cache", "-p",
              "no:cacheprovider"]
    with FakeOpenAI() as server:  # default answers: YES, and "affirmative" for audio
        common.append(f"--duplexact-judge-base-url={server.url}")
        first = inproc(pytester, "--duplexact-model=oracle",
                       "--duplexact-run-dir=run1", *common)
        calls = server.count
        assert calls > 0
        again = inproc(
            pytester, f"--duplexact-model=recorded:{pytester.path / 'run1'}",
            "--duplexact-run-dir=run2", *common)
        assert server.count == calls, "the re-score asked the judge again"
    r1 = json.loads(Path(pytester.path, "run1", "report.json").read_text())
    r2 = json.loads(Path(pytester.path, "run2", "report.json").read_text())
    tt = r1["summary"]["actions"]["take_turn"]["counts"]
    assert (tt["n_S"], tt["S"]) == (3, 1.0)
    bc = r1["summary"]["actions"]["backchannel"]["conditions"]
    # the fake audio judge hears every backchannel as affirmative
    assert bc["affirmative"]["I"] == 1.0 and bc["uncertainty"]["I"] == 0.0
    assert "functions as affirmative" in first.stdout.str()
    assert r1["usage"]["text_judge"]["model"] == "gpt-5.4"
    assert r1["usage"]["text_judge"]["calls"] > 0
    assert r2["usage"]["text_judge"]["calls"] == 0
    # tokens as the service billed them; the bundled prices do not know gpt-5.4: said, not
    # guessed; the cached re-score bills nothing
    assert r1["usage"]["text_judge"]["input_tokens"] == 10 * r1["usage"]["text_judge"]["calls"]
    assert r1["cost"]["services"]["text_judge"]["cost"] is None
    assert not r1["cost"]["complete"] and r2["cost"]["complete"] and r2["cost"]["total"] == 0
    assert r2["usage"]["text_judge"]["cache_hits"] == r1["usage"]["text_judge"]["requests"]
    verdicts = [{k: i[k] for k in ("id", "immediate", "subsequent")} for i in r1["instances"]]
    assert verdicts == [{k: i[k] for k in ("id", "immediate", "subsequent")}
                        for i in r2["instances"]]
    assert "gpt-5.4" in again.stdout.str()
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
