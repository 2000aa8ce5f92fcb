"""``duplexact report RUN.json [--html F] [--markdown F] [--baseline B]``: render a stored
report (of a run or of a merge) without running anything.

Writes the HTML page and / or the Markdown when asked, then prints the terminal tables (the
files first: a reader that stops early, ``| head``, loses no file); with ``--baseline``
compares against that stored report first (report/sections/baseline.py) and exits 1 on a
significant drop, so the command doubles as a CI gate on stored reports. Exit 2: a file
cannot be read or is not a DuplexAct report, or an output path cannot be written (checked
before anything is rendered: report/output.py).

Optional attributes of ``args`` (used when the console script offers them): ``audio``
('embed' | 'link' | 'none'), ``embed_limit``, ``recordings`` (extra run directories),
``baseline_alpha``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import MALFORMED, read_report, refuse
from ..model import Report
from ..output import OutputError, check_output, print_lines, write_output
from ..sections import baseline as baseline_mod


def check_outputs(args) -> None:
    """Every output path of ``args`` can take its file (an ``OutputError`` says why not)."""
    inputs = [p for p in (args.report, getattr(args, "baseline", None)) if p]
    markdown, html = getattr(args, "markdown", None), getattr(args, "html", None)
    if markdown:
        check_output(markdown, "--markdown", "report.md", inputs)
    if html:
        check_output(html, "--html", "report.html", inputs)
    if markdown and html and Path(markdown).resolve() == Path(html).resolve():
        raise OutputError(f"cannot write --html {html}: --markdown writes the same file; "
                          "give each its own name")


def main(args) -> int:
    try:
        check_outputs(args)  # before anything is read or rendered: said at once
        # parsed once; every view reads the typed report
        report = Report.from_json(read_report(args.report, ("model", "settings", "summary",
                                                            "totals", "instances")))
        return _render(args, report)
    except OutputError as e:
        print(f"duplexact report: {e}", file=sys.stderr)
        return 2
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

    written = []  # the files, written before anything is printed
    if getattr(args, "markdown", None):
        from .markdown import render as render_markdown

        out = write_output(args.markdown, render_markdown(report), "--markdown", "report.md")
        written.append(f"Markdown: {out}")
    if getattr(args, "html", None):
        from .html import embed_limit, write

        out = write(report, args.html, report_path=args.report,
                    audio=getattr(args, "audio", None) or "embed",
                    embed_limit=embed_limit(args),
                    recordings=getattr(args, "recordings", None) or ())
        written.append(f"HTML: {out} ({out.stat().st_size // 1024} kB)")
    lines = list(render_terminal(report))
    if report.gates:  # stored results: the terminal view only prints live ones
        lines += ["\nGates (as stored):"] + [f"  {g.message}" for g in report.gates]
    print_lines(lines + written)  # a reader gone (| head): quietly, the status kept
    return status
