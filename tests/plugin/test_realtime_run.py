"""`pytest --duplexact-model=gpt-realtime` end to end, against the fake realtime server on
127.0.0.1 (tests/fakes/realtime_server.py, its own process), with several sessions in flight
through --duplexact-concurrency. Real time: each trial streams its audio at 1x."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.servers import child

KEY = "sk-test-DUPLEXACT-never-written-0123456789"


# The fake speaks the endpoint model's bundled reply (real speech, so the VAD hears it).
SPEECH = Path(__file__).parents[2] / "pytest_duplexact" / "models" / "assets" / "response.flac"
SCRIPT = json.dumps({"speech_file": str(SPEECH), "speak_s": 3.0, "answer_after_ms": 300,
                     "text": "Sure, I can help you with that right away today."})


@pytest.fixture
def realtime_server():
    with child("realtime_server.py", "--script", SCRIPT) as fake:
        yield f"http://127.0.0.1:{fake.port}/v1"


@pytest.mark.slow
def test_gpt_realtime_concurrent_run(pytester, realtime_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", realtime_server)
    res = pytester.runpytest_subprocess(
        "--duplexact-model=gpt-realtime", "--duplexact-action=take_turn",
        "--duplexact-limit=1", "--duplexact-concurrency=3", "--duplexact-run-dir=run",
        "--duplexact-timing-tolerance=off",  # the guard: test_timing_guard_run.py, load-free
        "-p", "no:cacheprovider", timeout=240)
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    assert rep["totals"] == {"instances": 3, "errors": 0}, res.stdout.str()
    for inst in rep["instances"]:
        tl = json.loads(Path(pytester.path, "run", inst["recording"], "timeline.json")
                        .read_text())
        # the fake answers every user turn 300 ms after its VAD hears the end: the heard
        # output has one reply, after the user's speech
        assert tl["segments"], inst["id"]
        assert tl["segments"][0]["start"] > tl["user"][0][1], inst["id"]
        assert inst["immediate"]["verdict"] in ("success", "failure")
    delayed = [i for i in rep["instances"] if i["condition"] == "delayed"]
    assert delayed[0]["immediate"]["verdict"] == "success"  # [0, 3] s covers the 0.3 s reply
    for path in Path(pytester.path, "run").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_missing_key_fails_before_any_instance(pytester, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = pytester.runpytest_subprocess("--duplexact-model=gpt-realtime",
                                        "--duplexact-run-dir=run", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "OPENAI_API_KEY" in res.stderr.str()
    assert not Path(pytester.path, "run", "instances").exists()
