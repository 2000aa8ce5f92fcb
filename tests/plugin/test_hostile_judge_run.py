"""A judged run whose judge answers HTTP 200 with an HTML page: every judged stage is a judge
error (retried first), the immediate verdicts the rules computed are kept, and with every
verbosity pytest offers (--tb=long -l --showlocals -vv --junitxml) the key is printed and
stored nowhere."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes import FakeOpenAI, Raw

KEY = "sk-test-HOSTILE-never-shown-1234567890"


def test_html_judge_keeps_immediate_verdicts_and_never_shows_the_key(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI() as server:
        server.responder = lambda rec: Raw(b"<html><h1>502 Bad Gateway</h1></html>")
        res = pytester.runpytest_subprocess(
            "--duplexact-model=oracle", "--duplexact-condition=take_turn.delayed",
            "--duplexact-limit=1", "--duplexact-judge=gpt-5.4", "--duplexact-run-dir=run",
            f"--duplexact-judge-base-url={server.url}", "--duplexact-judge-timeout=20",
            "--tb=long", "-l", "--showlocals", "-vv", "--junitxml=junit.xml",
            "-p", "no:cacheprovider", timeout=300)
        asked = server.count
    report = json.loads(Path(pytester.path, "run", "report.json").read_text())
    (inst,) = report["instances"]
    assert inst["immediate"]["verdict"] == "success"  # measured by the rules, kept
    assert inst["subsequent"]["verdict"] == "judge_error"
    assert "unusable answer" in inst["subsequent"]["reason"] + str(inst["subsequent"])
    assert asked == 4  # one question, the default 4 attempts
    out = res.stdout.str() + res.stderr.str()
    assert KEY not in out
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
