"""The docs' headless-Chromium commands paste as printed where users run them, as root in a
container or CI too: Chromium refuses to start as root without --no-sandbox."""

from __future__ import annotations

import re
from pathlib import Path

REPORTS_MD = Path(__file__).resolve().parents[2] / "docs" / "reports.md"


def test_every_chromium_command_in_the_docs_runs_as_root():
    text = REPORTS_MD.read_text(encoding="utf-8").replace("\\\n", " ")
    commands = re.findall(r"^chromium .*$", text, flags=re.M)
    assert len(commands) >= 2, "the headless commands moved: update this test"
    assert all("--headless" in c and "--no-sandbox" in c for c in commands), commands
    assert "As root" in text and "without `--no-sandbox`" in text  # and it says why
