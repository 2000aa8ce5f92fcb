"""The terminal view of a report: the paper's Table 4 (per action I / S, T for stop /
interrupt / recover) and Table 16 (per condition "I / S (n_S)") layouts, one model."""

from __future__ import annotations

from ...data import taxonomy
from ..aggregate import NA
from ..model import Report
from ..stats import Rate, rate_of
from .rows import (
    ConditionRow,
    action_rows,
    borderline_line,
    condition_rows,
    fmt_rate,
    fmt_timing,
)

WIDE_MARK = "~"
WIDE_LEGEND = ("~ = 95% Wilson interval wider than +/-10 points (small n): a rough "
               "indication only (docs/reports.md)")


def _rate(r: Rate) -> str:
    """The rate in %, with WIDE_MARK when its 95% interval is wider than +/-10 points."""
    return fmt_rate(r, ci=False)


def cell(row: ConditionRow) -> str:
    """``I / S (n_S)`` as in Table 16."""
    s = NA if row.S.value is None else f"{_rate(row.S)} ({row.S.n})"
    return f"{_rate(row.I)} / {s}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = []
    for j, r in enumerate(rows):
        out.append("  ".join(v.ljust(w) if k == 0 else v.rjust(w)
                             for k, (v, w) in enumerate(zip(r, widths))).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def action_table(report: Report) -> list[str]:
    rows = [["action", "I", "S (n_S)", "T median (IQR, n)", "n", "valid I", "notes"]]
    for r in action_rows(report):
        s = NA if r.S.value is None else f"{_rate(r.S)} ({r.S.n})"
        rows.append([r.label, _rate(r.I), s, fmt_timing(r.timing) if r.timed else "",
                     str(r.n), str(r.I.n), r.notes])
    return _table(rows)


def condition_table(report: Report) -> list[str]:
    rows = [["condition", "I / S (n_S)", "n", "notes"]]
    for r in condition_rows(report):
        rows.append([f"{r.action_label} / {r.label}", cell(r), str(r.n), r.notes])
    return _table(rows)


def _counts_cell(c: dict | None) -> str:
    """``I / S (n_S)`` of a stored Counts object; '-' where nothing was measured."""
    if c is None or not c["n"]:
        return "-"
    i, s = rate_of(c, "I"), rate_of(c, "S")
    return f"{_rate(i)} / {NA if s.value is None else f'{_rate(s)} ({s.n})'}"


def corpus_table(report: Report) -> list[str]:
    """Per corpus, pooled and per action (only data whose instances name their corpus)."""
    summary = report.summary
    acts = [a for a in taxonomy.ACTIONS if a in summary.actions]
    rows = [["corpus", "all"] + [taxonomy.ACTION_LABELS[a] for a in acts]]
    for corpus, c in summary.corpora.items():
        rows.append([corpus, _counts_cell(c)] + [_counts_cell(summary.corpus_counts(a, corpus))
                                                 for a in acts])
    return _table(rows)


def latency_table(report: Report) -> list[str]:
    """Latency p10 / p50 / p90 (s) with n, and the no-response rate (latency_rows.py)."""
    from . import latency_rows

    found = latency_rows.rows(report)
    if not found:
        return []
    table = _table([latency_rows.HEADER] + [[r.label] + latency_rows.cells(r) for r in found])
    return ["", "Latency in s (p10 / p50 / p90, n); no response = no substantive model "
            "speech in the trial; paper medians: its models' Table 15 range"] + table


def render(report: Report, gate_results=()) -> list[str]:
    """``gate_results``: the gates to print (each with a ``message``), live ones: a stored
    report's are printed by the caller that wants them (cli.py)."""
    from ..sections.judging import s_note

    model = report.model_label or "?"
    note = s_note(report)
    mark = [f"S: {note}"] if note else []
    out = ["", f"DuplexAct results for {model}  (I, S in %; T in s)"]
    channel = (report.settings or {}).get("channel")
    if channel:  # what the model heard (docs/channels.md)
        out.append(f"heard through the channel {channel}")
    out += action_table(report) + mark
    if (line := borderline_line(report)) is not None:
        out.append(line)
    out += ["", "Per condition (paper Table 16 layout: I / S (n_S))"]
    out += condition_table(report) + mark
    if report.summary.corpora:
        out += ["", "Per corpus (I / S (n_S))"] + corpus_table(report)
    out += latency_table(report)
    from ..sections.robustness import terminal_lines

    out += terminal_lines(report)
    if report.paper_comparison:
        from ..sections.paper_comparison import render_lines

        out += [""] + render_lines(report.paper_comparison)
    if any(WIDE_MARK in line for line in out):
        out.append(WIDE_LEGEND)
    errors = report.totals.errors
    if errors:
        out.append(f"{errors} instance(s) ended in a harness/model error and enter no "
                   "rate (see the errors above).")
    from ...data.usage import all_local, describe
    from ..sections.timing import line as timing_line

    if (timing := timing_line(report.clock)) is not None:
        out.append(timing)

    if report.usage:
        out += [""] + describe(report.usage)
    if report.cost and not (report.usage and all_local(report.usage)):
        from ...spend.cost import describe as describe_cost

        out += describe_cost(report.cost)
    from ...spend.estimate import concurrency_line, versus

    line = versus(report.estimate, report.measured)
    if line:
        out.append(line)
    if (line := concurrency_line(report.measured)) is not None:
        out.append(line)
    out += report.note_lines()
    return out + verdict_lines(report, gate_results)


def verdict_lines(report: Report, gate_results=()) -> list[str]:
    """The gates' and the baseline's lines, as a run's terminal ends (and ``duplexact merge
    --gate`` prints them)."""
    out = []
    if gate_results:
        out += ["", "Gates:"] + [f"  {g.message}" for g in gate_results]
    if report.baseline:
        from ..sections.baseline import render_lines

        out += ["", "Baseline:"] + [f"  {line}" for line in render_lines(report.baseline)]
    return out
