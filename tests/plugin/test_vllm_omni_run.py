"""`pytest --duplexact-model=vllm-omni` end to end against the fake vLLM-Omni duplex server in
a process of its own (tests/fakes/vllm_omni_server.py, MiniCPM-o 4.5's 1 s unit and preset),
over one instance of each pipeline: Direct Replay (take_turn), Simulator Replay (stop) and
Barge-in Replay (interrupt), three sessions in flight. Real time: each trial streams at 1x.
Also the probe (`duplexact models vllm-omni -o url=...`) and the preflight's one-line
refusal (exit 4), which stream nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import child

SPEECH = Path(__file__).parents[2] / "pytest_duplexact" / "models" / "assets" / "response.flac"
CONDITIONS = "take_turn.immediate,stop.direct_interruption,interrupt.help"


@pytest.fixture
def server(tmp_path):
    """The fake in its own process: yields (url, path of the ground truth it writes when its
    stdin closes, a function that stops it)."""
    log = tmp_path / "truth.json"
    script = {"speech_file": str(SPEECH), "speak_s": 3.5, "answer_after_ms": 300}
    with child("vllm_omni_server.py", "--script", json.dumps(script), "--log", log) as fake:
        yield f"ws://127.0.0.1:{fake.port}/v1/realtime?duplex=1", log, fake.stop


@pytest.mark.slow
def test_end_to_end_run_over_all_three_pipelines(pytester, server):
    url, log, stop = server
    res = pytester.runpytest_subprocess(
        "--duplexact-model=vllm-omni", f"--duplexact-model-option=url={url}",
        f"--duplexact-condition={CONDITIONS}", "--duplexact-limit=1",
        "--duplexact-concurrency=3", "--duplexact-run-dir=run", "-p", "no:cacheprovider",
        "--duplexact-timing-tolerance=off",  # the guard: test_timing_guard_run.py, load-free
        timeout=300)
    stop()
    run = Path(pytester.path, "run")
    rep = json.loads((run / "report.json").read_text())
    assert rep["totals"] == {"instances": 3, "errors": 0}, res.stdout.str()
    by_action = {i["action"]: i for i in rep["instances"]}
    assert set(by_action) == {"take_turn", "stop", "interrupt"}
    truth = json.loads(log.read_text())
    run_sessions = [s for s in truth if s["sent"] and s["t0_monotonic"] is not None]
    assert len(run_sessions) == 3 and all(s["closed"] == "client_close" for s in truth)

    # Direct Replay: one reply after the user's speech, every bit of it acknowledged as played
    folder = run / by_action["take_turn"]["recording"]
    tl = json.loads((folder / "timeline.json").read_text())
    assert tl["segments"] and tl["segments"][0]["start"] > tl["user"][0][1]
    events = [what for _, what in json.loads((folder / "recording.json").read_text())["events"]]
    assert any(what.startswith("speak resp_") for what in events)

    # Simulator Replay: the cue talks over the model; the fake reports the overlap, the model
    # listens at its next unit (response.listen with the response's id): playback stops there
    # and one truncating playback.ack carries what was heard, the same ms the recording holds
    recording = json.loads((run / by_action["stop"]["recording"] / "recording.json")
                           .read_text())
    events = [what for _, what in recording["events"]]
    assert any(what.startswith("overlap.decision listen") for what in events), events
    assert any(what.startswith("listen mid-response") for what in events), events
    [cut] = [what for what in events if what.startswith("truncate ")]
    rid, heard_ms = cut.split()[1], int(cut.split()[2][:-2])
    acks = [a for s in truth for a in s["acks"] if a["response_id"] == rid]
    assert [a["played_ms"] for a in acks if a["truncate"]] == [heard_ms], acks
    assert all(a["played_ms"] <= heard_ms for a in acks)

    # Barge-in Replay ran to the end of its session with the model heard
    assert by_action["interrupt"]["immediate"]["verdict"] in ("success", "failure")


def test_the_probe_prints_the_model_and_its_capabilities(server):
    url, _, _ = server
    out = subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "models", "vllm-omni",
                          "-o", f"url={url}"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "vllm-omni  (streaming)" in out.stdout and "[ready]" in out.stdout
    assert ("reachable: openbmb/MiniCPM-o-4_5: model_native_duplex, chunk period 1000 ms"
            in out.stdout), out.stdout


def test_the_preflight_refuses_in_one_line_with_exit_4(pytester):
    res = pytester.runpytest_subprocess(
        "--duplexact-model=vllm-omni",
        "--duplexact-model-option=url=ws://127.0.0.1:9/v1/realtime?duplex=1",
        "--duplexact-model-option=connect_timeout=3", "--duplexact-run-dir=run",
        "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in res.stderr.str().splitlines() if "vllm-omni" in line]
    assert len(lines) == 1 and "could not connect" in lines[0], res.stderr.str()
    assert not Path(pytester.path, "run", "instances").exists()
