"""The docs' complete example model, done literally as a newcomer would: the code block of
docs/models.md written to my_duplex/model.py, then the documented plain `pytest` command run
from that folder. It must import (the working directory is looked in for model specs) and
score like a real model: non-zero take_turn I, and the report page plays its recordings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.helpers import parsed

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def example_code(heading: str = "### A complete example") -> str:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(heading + "\n"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def documented_run(tmp_path, module: str, code: str, *args: str) -> dict:
    """Writes ``my_duplex/<module>.py`` and runs the documented plain `pytest` command (its
    console-script spelling: without `python -m` the working directory is not on sys.path)
    from the folder that holds it; returns report.json."""
    pkg = tmp_path / "my_duplex"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / f"{module}.py").write_text(code)
    cmd = [sys.executable, "-c", "import sys, pytest; sys.exit(pytest.console_main())",
           f"--duplexact-model=my_duplex.{module}:factory", *args,
           "--duplexact-run-dir=run", "-p", "no:cacheprovider", "-q"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert "cannot import module" not in res.stdout + res.stderr, res.stdout[-2000:]
    assert (tmp_path / "run" / "report.json").is_file(), res.stdout[-3000:] + res.stderr[-2000:]
    return json.loads((tmp_path / "run" / "report.json").read_text())


def assert_playable(report: dict, tmp_path) -> None:
    from pytest_duplexact.report.views.html import render

    page = render(parsed(report), report_path=tmp_path / "run" / "report.json")
    assert "<audio" in page and "recordings not found" not in page


@pytest.mark.slow
def test_the_docs_example_scores_from_its_own_folder(tmp_path):
    report = documented_run(tmp_path, "model", example_code(),
                            "--duplexact-action=take_turn,wait,stop")
    actions = report["summary"]["actions"]
    assert actions["take_turn"]["counts"]["I"] == 1 / 3  # delayed in time, immediate too late
    assert actions["wait"]["counts"]["I"] == 1  # falls silent when the user resumes (docs)
    # talked over, it stops: the stepped barge-in the docs show
    assert actions["stop"]["counts"]["I"] == actions["stop"]["counts"]["S"] == 1
    assert_playable(report, tmp_path)


@pytest.mark.slow
def test_the_docs_streaming_example_scores_as_documented(tmp_path):
    """The streaming example runs on the wall clock: three conditions' nine instances side by
    side (about half a minute)."""
    report = documented_run(tmp_path, "live", example_code("### A complete streaming example"),
                            "--duplexact-condition=take_turn.immediate,take_turn.delayed,"
                            "stop.direct_interruption", "--duplexact-concurrency=9",
                            # the timing guard is tested load-free (test_timing_guard_run.py)
                            "--duplexact-timing-tolerance=off")
    by = {(o["action"], o["condition"]): [] for o in report["instances"]}
    for o in report["instances"]:
        by[o["action"], o["condition"]].append(o["immediate"]["verdict"])
    assert by["take_turn", "delayed"] == ["success"] * 3, report["instances"]
    assert by["take_turn", "immediate"] == ["failure"] * 3  # about 0.8 s: too late (docs)
    assert by["stop", "direct_interruption"] == ["success"] * 3  # the barge-in cuts its reply
    model = report["usage"]["model"]  # the session's usage attribute, summed over sessions
    assert model["sessions"] == 9 and model["input_audio_s"] > 9 * 5, model
    assert_playable(report, tmp_path)
