"""`pytest --duplexact-model=freeze-omni | vita-1.5 | lychee-fd | mini-omni2` end to end, each
against its fake in a process of its own on 127.0.0.1 (tests/fakes), over the pipelines the
paper ran it on: Freeze-Omni on Direct and Simulator Replay, the others on Direct Replay
(mini-omni2's Simulator Replay instance is skipped as unsupported, not scored). Real time, so
the four runs (and one against a dead server) go at once; every server_url carries a password
that must appear in no output of `-l --tb=long --junitxml`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import child

SPEECH = Path(__file__).parents[2] / "pytest_duplexact" / "models" / "assets" / "response.flac"
PASSWORD = "pw-DUPLEXACT-never-written-0123456789"
REPLY = {"speech_file": str(SPEECH)}

RUNS = {  # model -> (fake argv, conditions, options)
    "freeze-omni": (["socketio_server.py", "--dialect", "freeze-omni", "--script",
                     json.dumps({**REPLY, "segments": 4, "segment_s": 1.0})],
                    "take_turn.immediate,stop.direct_interruption",
                    ["transports=websocket", "verify=false"]),
    "vita-1.5": (["socketio_server.py", "--dialect", "vita-1.5", "--script",
                  json.dumps({**REPLY, "segments": 2, "segment_s": 1.0,
                              "text": "Okay, thanks for telling me."})],
                 "take_turn.immediate", ["verify=false"]),
    "lychee-fd": (["lychee_server.py", "--script", json.dumps({**REPLY, "speak_s": 2.0})],
                  "take_turn.immediate", []),
    "mini-omni2": (["miniomni_server.py", "--script", json.dumps({**REPLY, "steps": 8})],
                   "take_turn.immediate,stop.direct_interruption", []),
}


def plugin_run(folder: Path, model: str, url: str, conditions: str, options: list[str]):
    folder.mkdir()
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-l",
           "--tb=long", "--junitxml=junit.xml",
           f"--duplexact-model={model}", f"--duplexact-model-option=server_url={url}",
           *[f"--duplexact-model-option={o}" for o in options],
           f"--duplexact-condition={conditions}", "--duplexact-limit=1",
           "--duplexact-concurrency=2", "--duplexact-run-dir=run",
           "--duplexact-timing-tolerance=off"]  # the guard: test_timing_guard_run.py
    return subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


@pytest.mark.slow
def test_the_four_open_server_adapters_end_to_end(tmp_path):
    fakes, runs = [], {}
    try:
        for model, (argv, conditions, options) in RUNS.items():
            fakes.append(child(*argv))
            port = fakes[-1].port
            scheme = "https" if argv[0] == "socketio_server.py" else "http"  # HTTPS only
            url = f"{scheme}://user:{PASSWORD}@127.0.0.1:{port}"
            runs[model] = plugin_run(tmp_path / model, model, url, conditions, options)
        runs["dead"] = plugin_run(tmp_path / "dead", "freeze-omni",
                                  f"http://user:{PASSWORD}@127.0.0.1:1",
                                  "take_turn.immediate", ["connect_timeout=2"])
        out = {name: proc.communicate(timeout=240)[0] for name, proc in runs.items()}
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
        for fake in fakes:
            fake.stop()

    for model in RUNS:
        rep = json.loads((tmp_path / model / "run" / "report.json").read_text())
        by_action = {i["action"]: i for i in rep["instances"]}
        assert rep["totals"]["errors"] == 0, out[model]
        # Direct Replay: the model answered after the user's turn
        tl = json.loads((tmp_path / model / "run" / by_action["take_turn"]["recording"]
                         / "timeline.json").read_text())
        assert tl["segments"] and tl["segments"][0]["start"] > tl["user"][0][1], model
        if model != "freeze-omni":  # the native transcript is the timeline's text
            said = {"vita-1.5": "Okay, thanks for telling me."}.get(model, "one two three")
            assert said in " ".join(seg["text"] for seg in tl["segments"]), tl["segments"]
        if model == "mini-omni2":  # not applicable, journaled: never a miss, never re-run
            assert by_action["stop"]["immediate"]["verdict"] == "not_applicable"
            assert "unsupported by this model: mini-omni2 runs only on direct" in out[model]
        if model == "freeze-omni":  # Simulator Replay ran, and the cue met model speech
            assert by_action["stop"]["immediate"]["verdict"] in ("success", "failure"), \
                out[model]
    # a dead server: the preflight's one connection refuses the run, before its folder exists
    assert "ERROR: --duplexact-model=freeze-omni: " in out["dead"], out["dead"]
    assert "Connection refused" in out["dead"] and len(out["dead"].splitlines()) <= 2
    assert not (tmp_path / "dead" / "run").exists()

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    for path in files:
        assert PASSWORD.encode() not in path.read_bytes(), path
    for name, text in out.items():
        assert PASSWORD not in text, name


@pytest.mark.parametrize("name", ["freeze-omni", "vita-1.5", "lychee-fd", "mini-omni2"])
def test_the_models_listing_names_each_adapter(name):
    from pytest_duplexact.cli.model_listing import render

    text, _ = render([name])
    assert text.startswith(f"{name}  (streaming)") and "server_url option" in text
