"""The docs' complete example model, done literally as a newcomer would: the code block of
docs/models.md written to my_duplex/model.py, then the documented plain `pytest` command run
from that folder. It must import (the working directory is looked in for model specs) and
score like a real model: non-zero take_turn I, and the report page plays its recordings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def example_code() -> str:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### A complete example"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_docs_example_scores_from_its_own_folder(tmp_path):
    pkg = tmp_path / "my_duplex"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(example_code())
    # the documented command, by its console-script spelling (no `python -m`: the working
    # directory is then not on sys.path)
    cmd = [sys.executable, "-c", "import sys, pytest; sys.exit(pytest.console_main())",
           "--duplexact-model=my_duplex.model:factory", "--duplexact-action=take_turn,wait",
           "--duplexact-run-dir=run", "-p", "no:cacheprovider", "-q"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONSAFEPATH": "1"})
    assert "cannot import module" not in res.stdout + res.stderr, res.stdout[-2000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    tt = report["summary"]["actions"]["take_turn"]["counts"]
    assert tt["I"] == 1 / 3, res.stdout[-3000:]  # delayed in time, immediate too late (docs)
    assert report["summary"]["actions"]["wait"]["counts"]["I"] == 2 / 3
    from pytest_duplexact.report.html import render

    page = render(report, report_path=tmp_path / "run" / "report.json")
    assert "<audio" in page and "recordings not found" not in page
