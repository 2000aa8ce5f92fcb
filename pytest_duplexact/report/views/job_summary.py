"""GitHub Actions job summary: when ``GITHUB_STEP_SUMMARY`` names a file, the run's Markdown
summary is appended to it (never overwritten: other steps write there too), within GitHub's
1 MiB limit per step. Too large with the failure list, it is written without it; still too
large, a one-line note says where the full report is."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "GITHUB_STEP_SUMMARY"
LIMIT = 1024 * 1024  # bytes a step summary may hold (GitHub's documented limit)


def append(report: dict, env: dict | None = None, report_path: str | None = None) -> str | None:
    """Append; returns the path written, or None when the variable is unset."""
    from .markdown import render

    env = os.environ if env is None else env
    target = env.get(ENV)
    if not target:
        return None
    path = Path(target)
    used = path.stat().st_size if path.exists() else 0
    room = LIMIT - used
    full = render(report)
    text = full
    if len(full.encode()) + 2 > room:
        text = render(report, failures=False)
    if len(text.encode()) + 2 > room:
        text = (f"DuplexAct: the summary does not fit in the job summary's 1 MiB; full report: "
                f"{report_path or 'report.json in the run directory'}")
        if len(text.encode()) + 2 > room:
            return None
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n" + text.rstrip("\n") + "\n")
    return str(path)
