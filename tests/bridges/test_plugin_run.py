"""`pytest --duplexact-model=bridge --duplexact-model-option=url=ws://127.0.0.1:PORT` end to end
against the scripted bridge (the real kit in its own process, the endpoint baseline behind
it): stepped over one bundled instance per pipeline (direct, simulator, barge-in), scored; a
model error mid-trial (here in the barge-in trial) is that instance's error, not a miss; the
bearer key never shows, not even in ``-l`` tracebacks.
Sample-exactness against the same model in process is tested below the pytest layer
(test_client.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bridges.support import scripted_server

CONDITIONS = "take_turn.immediate,stop.direct_interruption,interrupt.help"


KEY = "bridge-key-DUPLEXACT-never-written-0123456789"


def test_a_stepped_bridge_runs_every_pipeline_and_an_error_is_an_error(pytester, monkeypatch):
    script = {"model": "endpoint", "error_at_step": 40, "faults_in": "interrupt-help"}
    monkeypatch.setenv("DUPLEXACT_BRIDGE_API_KEY", KEY)  # the server requires it, we send it
    with scripted_server(script) as url:
        res = pytester.runpytest_subprocess(
            "--duplexact-model=bridge", f"--duplexact-model-option=url={url}",
            f"--duplexact-condition={CONDITIONS}", "--duplexact-limit=1",
            "--duplexact-transcriber=native", "--duplexact-run-dir=run",
            "-p", "no:cacheprovider", "-l", timeout=240)  # -l: tracebacks with locals
    out = res.stdout.str()
    assert KEY not in out and KEY not in res.stderr.str()
    for path in Path(pytester.path, "run").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    assert rep["totals"] == {"instances": 3, "errors": 1}, out
    outcomes = res.parseoutcomes()  # the error is pytest's error; the others pass or fail
    assert outcomes.get("errors") == 1
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2, outcomes
    assert "the server reported an error at step 40 (0.80 s): model scripted-endpoint failed " \
           "in step 40 at 0.80 s: RuntimeError: scripted failure" in out
    scored = [i for i in rep["instances"] if i["action"] != "interrupt"]
    assert {i["action"] for i in scored} == {"take_turn", "stop"}
    for inst in scored:
        assert inst["immediate"]["verdict"] in ("success", "failure"), inst
        tl = json.loads(Path(pytester.path, "run", inst["recording"], "timeline.json")
                        .read_text())
        assert tl["segments"], inst["id"]  # the endpoint's reply was heard and segmented
        assert any(s["text"] for s in tl["segments"]), inst["id"]  # with its TEXT words
