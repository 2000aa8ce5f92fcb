"""`pytest --duplexact-model=grok-voice | qwen-omni-realtime | minicpm-o` end to end: each
against its fake in a process of its own on 127.0.0.1 (tests/fakes), over one instance of
each pipeline: Direct Replay (take_turn), Simulator Replay (stop) and Barge-in Replay
(interrupt), three sessions in flight. Real time: each trial streams its audio at 1x."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data import audio
from pytest_duplexact.data.recording_io import track_file
from tests.support.servers import child

# The fakes speak the endpoint model's bundled reply (real speech, so the VAD hears it).
SPEECH = Path(__file__).parents[2] / "pytest_duplexact" / "models" / "assets" / "response.flac"
CONDITIONS = "take_turn.immediate,stop.direct_interruption,interrupt.help"

ADAPTERS = {  # model -> (fake server argv, key variable, fake's URL from its port)
    "grok-voice": (
        ["realtime_server.py", "--dialect", "xai", "--script",
         json.dumps({"speech_file": str(SPEECH), "speak_s": 3.5, "answer_after_ms": 300})],
        "XAI_API_KEY", "base_url=http://127.0.0.1:{port}/v1"),
    "qwen-omni-realtime": (
        ["realtime_server.py", "--dialect", "dashscope", "--script",
         json.dumps({"speech_file": str(SPEECH), "speak_s": 3.5, "answer_after_ms": 300})],
        "DASHSCOPE_API_KEY", "base_url=http://127.0.0.1:{port}/api-ws/v1"),
    "minicpm-o": (
        ["minicpm_server.py", "--script",
         json.dumps({"speech_file": str(SPEECH), "speak_steps": 4, "compute_ms": 150})],
        "MINICPM_O_API_KEY", "server_url=ws://127.0.0.1:{port}"),
}
KEY = "test-key-DUPLEXACT-never-written-0123456789"


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request):
    name = request.param
    argv, env, url = ADAPTERS[name]
    with child(*argv) as fake:
        yield name, env, url.format(port=fake.port)


@pytest.mark.slow
def test_end_to_end_run_over_all_three_pipelines(pytester, adapter, monkeypatch):
    name, env, url_option = adapter
    monkeypatch.setenv(env, KEY)
    res = pytester.runpytest_subprocess(
        f"--duplexact-model={name}", f"--duplexact-model-option={url_option}",
        *(["--duplexact-model-option=silence_duration_ms=300"] if name != "minicpm-o" else
          ["--duplexact-model-option=force_listen_count=1"]),
        f"--duplexact-condition={CONDITIONS}", "--duplexact-limit=1",
        "--duplexact-concurrency=3", "--duplexact-run-dir=run", "--junitxml=junit.xml",
        "--duplexact-timing-tolerance=off",  # the guard: test_timing_guard_run.py, load-free
        "-p", "no:cacheprovider", timeout=300)
    run = Path(pytester.path, "run")
    rep = json.loads((run / "report.json").read_text())
    assert rep["totals"] == {"instances": 3, "errors": 0}, res.stdout.str()
    by_action = {i["action"]: i for i in rep["instances"]}
    assert set(by_action) == {"take_turn", "stop", "interrupt"}

    # Direct Replay: one reply, after the user's speech
    tl = json.loads((run / by_action["take_turn"]["recording"] / "timeline.json").read_text())
    assert tl["segments"] and tl["segments"][0]["start"] > tl["user"][0][1]

    # Simulator Replay: the cue talks over the model, which stops at once (the barge-in cut)
    folder = run / by_action["stop"]["recording"]
    recording = json.loads((folder / "recording.json").read_text())
    cue = recording["cue"]
    assert cue is not None
    cuts = [t for t, what in recording["events"]
            if what.startswith("speech_started") and t >= cue["start"] - 0.05]
    assert cuts, recording["events"]
    out = audio.read(track_file(folder, "output"))
    cut = cuts[0]
    after = out[int((cut + 0.025) * 16000): int((cut + 0.2) * 16000)]
    before = out[int((cut - 0.5) * 16000): int(cut * 16000)]
    assert np.sqrt(np.mean(before ** 2)) > 0.01, "the model was not speaking at the cut"
    assert np.max(np.abs(after)) < 1e-3, "model audio went on after the barge-in"
    assert any(what.startswith("truncate") for _, what in recording["events"])

    # Barge-in Replay ran to the end of its session with the model heard
    assert by_action["interrupt"]["immediate"]["verdict"] in ("success", "failure")

    # the key is nowhere in what the run wrote, nor in the junit xml
    files = [p for p in run.rglob("*") if p.is_file()] + [Path(pytester.path, "junit.xml")]
    assert Path(pytester.path, "junit.xml").is_file()
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("name, message", [
    ("grok-voice", "grok-voice: no API key. Set the XAI_API_KEY environment variable"),
    ("qwen-omni-realtime", "qwen-omni-realtime: no API key. Set the DASHSCOPE_API_KEY"),
    ("minicpm-o", "minicpm-o: no server. Start the MiniCPM-o demo gateway"),
])
def test_preflight_fails_before_any_instance_with_one_message(pytester, monkeypatch, name,
                                                              message):
    for env in ("XAI_API_KEY", "DASHSCOPE_API_KEY", "MINICPM_O_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    res = pytester.runpytest_subprocess(f"--duplexact-model={name}", "--duplexact-run-dir=run",
                                        "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert res.stderr.str().count(message) == 1, res.stderr.str()
    assert not Path(pytester.path, "run", "instances").exists()
