"""``duplexact compare A.json B.json [--html out.html]``: run B compared with run A.

The baseline gate's comparison (baseline.compare: paired on the same instances, McNemar's
exact test, Newcombe intervals and the flips; unpaired when the instance sets differ) between
two stored reports, printed in full: every comparison with its change and p-values, and every
flip with both runs' reasons, and each action's and condition's median latency in both runs
with its n and the change (latency_rows.deltas). ``--html`` writes the comparison page
(compare_page.py): the per-condition deltas with their intervals, the latency deltas, the
flip list, and each flip's lanes and audio from both runs side by side.

The page is written before anything is printed (a reader that stops early, ``| head``, loses
no file). Exit 0: no significant drop; 1: a significant drop (so the command is a CI gate on
stored reports too); 2: a report cannot be read, or ``--html`` cannot be written (checked
before anything is read: report/output.py).
"""

from __future__ import annotations

import sys

from .. import MALFORMED, read_report, refuse
from ..model import Report
from ..output import OutputError, check_output, print_lines
from ..sections import baseline as baseline_mod
from . import latency_rows
from .terminal import _table

REQUIRED = ("model", "settings", "summary", "instances")


def table_lines(section: dict) -> list[str]:
    """Every comparison: baseline and this run's rates, the change, p, Holm's p, verdict."""
    rows = [["comparison", "A % (n)", "B % (n)", "change", "p", "p (Holm)", "verdict"]]
    for r in section["comparisons"]:
        rows.append([r["target"], f"{100 * r['baseline']['rate']:.1f} ({r['baseline']['n']})",
                     f"{100 * r['current']['rate']:.1f} ({r['current']['n']})",
                     baseline_mod.change_text(r), f"{r['p_value']:.3g}",
                     f"{r['p_adjusted']:.3g}", baseline_mod.verdict(r, section["alpha"])])
    return _table(rows) if len(rows) > 1 else ["(nothing measured in both runs)"]


def latency_lines(a: Report, b: Report) -> list[str]:
    """Per action and condition: each run's median latency with its n, and the change."""
    found = latency_rows.deltas(a, b)
    if not found:
        return []
    return ["", "Latency per action and condition (p50 in s, n; change = B - A, "
            "descriptive):"] + _table([latency_rows.DELTA_HEADER] + [[d["label"]]
                                      + latency_rows.delta_cells(d) for d in found])


def render_lines(section: dict, a: Report, b: Report, a_path: str,
                 b_path: str) -> list[str]:
    out = [f"A: {a_path}: {baseline_mod.against(section)}",
           f"B: {b_path}: {b.model_label} ({b.created})"]
    channels = [(r.settings or {}).get("channel") or "clean" for r in (a, b)]
    if channels != ["clean", "clean"]:  # the same instances heard through other channels
        out += [f"   A heard through channel {channels[0]}, B through channel {channels[1]} "
                "(docs/channels.md)"]
    out += [""]
    out += [section["message"], f"  {section['pairing_note']}",
            f"  method: {section['method']}"]
    out += [f"  warning: {w}" for w in section["warnings"]]
    out += ["", "Per action and condition (A = baseline, B = this run):"] + table_lines(section)
    out += [f"  {line}" for line in baseline_mod.power_lines(section)]
    if (new := baseline_mod.newly_measured_line(section, "in B (not in A)")) is not None:
        out.append(f"  {new}")
    out += ["  " + baseline_mod.not_measured_text(m, "in B")
            for m in section.get("not_measured_now") or []]
    out += [f"  not compared: {s['target']}: {s['why']}"
            for s in baseline_mod.other_not_compared(section)]
    out += latency_lines(a, b)
    flips = section["flips"]
    if section["pairing"] == "paired":
        out += ["", f"Flips ({len(flips)}{baseline_mod.borderline_count(section)}):"]
        out += [f"  {baseline_mod.flip_line(f)}" for f in flips] or ["  none"]
    return out


def check_html(args) -> None:
    """``--html`` can take the page, and is neither report (an ``OutputError`` says why
    not)."""
    if getattr(args, "html", None):
        check_output(args.html, "--html", "compare.html", [args.a, args.b])


def _same_report(a, b) -> str | None:
    """Whether the two paths are one report: one file, or two copies byte for byte."""
    from pathlib import Path

    try:
        if Path(a).samefile(b):
            return "the same file"
        if Path(a).read_bytes() == Path(b).read_bytes():
            return "two copies of one report (the same bytes)"
    except OSError:
        return None
    return None


def main(args) -> int:
    """``args.a``, ``args.b`` (report paths), optional ``html``, ``alpha``, ``audio``,
    ``embed_limit``."""
    alpha = getattr(args, "alpha", None) or baseline_mod.DEFAULT_ALPHA
    try:
        check_html(args)  # before anything is read or compared: said at once
        # each parsed once; the comparison and both views read the typed reports
        a = Report.from_json(read_report(args.a, REQUIRED, label="A: "))
        b = Report.from_json(read_report(args.b, REQUIRED, label="B: "))
        section = baseline_mod.compare(b, a, alpha, str(args.a),
                                       bool(getattr(args, "ignore_borderline", False)))
        same = _same_report(args.a, args.b)
        if same:  # a typo's usual shape (runs/a twice): a "no change" that means nothing
            section["warnings"].insert(0, f"A and B are {same}: nothing can differ; "
                                          "give the two runs to compare")
        written = []  # the page, written before anything is printed
        if getattr(args, "html", None):
            from .compare_page import write
            from .html import embed_limit

            out = write(section, a, b, args.html, a_path=args.a, b_path=args.b,
                        audio=getattr(args, "audio", None) or "embed",
                        embed_limit=embed_limit(args))
            written.append(f"HTML: {out} ({out.stat().st_size // 1024} kB)")
    except OutputError as e:
        print(f"duplexact compare: {e}", file=sys.stderr)
        return 2
    except MALFORMED as e:  # a ReportFileError (BaselineError is one) or a hand-edited report
        return refuse("compare", e)
    # a reader gone (| head): quietly, the status kept
    print_lines(render_lines(section, a, b, str(args.a), str(args.b)) + written)
    return 0 if section["passed"] else 1
