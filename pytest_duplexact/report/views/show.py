"""``duplexact report RUN.json [--html F] [--markdown F] [--baseline B]``: render a stored
report (of a run or of a merge) without running anything.

Prints the terminal tables; writes the HTML page and / or the Markdown when asked; with
``--baseline`` compares against that stored report first (report/sections/baseline.py) and
exits 1 on a significant drop, so the command doubles as a CI gate on stored reports. Exit 2: a file
cannot be read or is not a DuplexAct report.

Optional attributes of ``args`` (used when the console script offers them): ``audio``
('embed' | 'link' | 'none'), ``embed_limit``, ``recordings`` (extra run directories),
``baseline_alpha``.
"""

from __future__ import annotations

from pathlib import Path

from .. import MALFORMED, read_report, refuse
from ..model import Report
from ..sections import baseline as baseline_mod


def main(args) -> int:
    try:
        # parsed once; every view reads the typed report
        report = Report.from_json(read_report(args.report, ("model", "settings", "summary",
                                                            "totals", "instances")))
        return _render(args, report)
    except MALFORMED as e:  # a ReportFileError (BaselineError is one) or a hand-edited report
        return refuse("report", e, f"{args.report}: ")


def _render(args, report: Report) -> int:
    status = 0
    if getattr(args, "baseline", None):
        alpha = getattr(args, "baseline_alpha", None) or baseline_mod.DEFAULT_ALPHA
        base = baseline_mod.load(args.baseline)  # a BaselineError: main says it, exit 2
        report = report.replace(baseline=baseline_mod.compare(
            report, base, alpha, str(args.baseline),
            bool(getattr(args, "ignore_borderline", False))))
        status = 0 if report.baseline["passed"] else 1

    from .terminal import render as render_terminal

    for line in render_terminal(report):
        print(line)
    if report.gates:  # stored results: the terminal view only prints live ones
        print("\nGates (as stored):")
        for g in report.gates:
            print(f"  {g.message}")
    if getattr(args, "markdown", None):
        from .markdown import render as render_markdown

        out = Path(args.markdown)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_markdown(report), encoding="utf-8")
        print(f"Markdown: {out}")
    if getattr(args, "html", None):
        from .html import DEFAULT_EMBED_LIMIT, write

        out = write(report, args.html, report_path=args.report,
                    audio=getattr(args, "audio", None) or "embed",
                    embed_limit=getattr(args, "embed_limit", None) or DEFAULT_EMBED_LIMIT,
                    recordings=getattr(args, "recordings", None) or ())
        print(f"HTML: {out} ({out.stat().st_size // 1024} kB)")
    return status
