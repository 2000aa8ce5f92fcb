"""The Markdown view of a report, for a pull request or a CI summary: per-action I / S / T with
n and 95% Wilson intervals, the paper's Table 16 cells, gates, the baseline comparison, the
paper's 14 models beside this one, and the failed instances. Reads the JSON report only."""

from __future__ import annotations

from ..model import Report
from ..sections.judging import s_note
from .rows import (
    PAPER_HEADER,
    action_rows,
    borderline_line,
    borderline_text,
    condition_rows,
    corpus_header,
    corpus_rows,
    failed,
    failure_reason,
    fmt_rate,
    fmt_timing,
    paper_note,
    paper_rows,
)

MAX_LISTED_FAILURES = 200  # a PR comment has a size limit; the HTML view lists every one


def dataset_line(report: Report) -> str:
    s = report.settings or {}
    fp = (s.get("dataset_fingerprint") or "")[:12]
    return f"`{s.get('dataset', '?')}` (fingerprint {fp})"


# --- Markdown -----------------------------------------------------------------------------------

def _esc(text) -> str:
    """A table cell from any text: ids, reasons and model names are data, never markup (a
    reason holding '<script>' or '</details>' must not change the page)."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(_esc(v) for v in r) + " |" for r in rows]
    return out


def render(report: Report, failures: bool = True) -> str:
    model = report.model_label or "?"
    tot = report.totals
    out = [f"## DuplexAct: {_esc(model)}", ""]
    out.append(f"{tot.instances} instance(s), {tot.errors} error(s) · data "
               f"{dataset_line(report)} · {report.generator or ''} · "
               f"{report.created or ''}")
    if report.shards:
        out.append(f"Merged from {len(report.shards)} shard report(s).")
    from ..sections.timing import line as timing_line

    if (timing := timing_line(report.clock)) is not None:
        out += ["", timing]
    out += ["", "Rates in %, each with its 95% Wilson interval [lo\u2013hi] and its n; `~` marks "
            "an interval wider than \u00b110 points (too few instances to read the rate "
            "closely). T: median (IQR, n) in seconds.", ""]

    out += ["### Actions (paper Table 4 layout)", ""]
    rows = [[r.label, fmt_rate(r.I), str(r.I.n), fmt_rate(r.S), str(r.S.n),
             fmt_timing(r.timing) if r.timed else "", str(r.n), r.notes]
            for r in action_rows(report)]
    out += _table(["Action", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S",
                   "T median (IQR, n)", "n", "not in a rate"], rows, "lrrrrrrl")
    note = s_note(report)
    mark = ["", f"> **S: {_esc(note)}**"] if note else []
    out += mark
    if (line := borderline_line(report)) is not None:
        out += ["", _esc(line) + "."]

    out += ["", "### Conditions (paper Table 16 cells)", ""]
    rows = [[r.action_label, r.label, fmt_rate(r.I), str(r.I.n), fmt_rate(r.S),
             str(r.S.n), str(r.n), r.notes] for r in condition_rows(report)]
    out += _table(["Action", "Condition", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S", "n",
                   "not in a rate"], rows, "llrrrrrl")
    out += mark

    if report.summary.corpora:  # data that names corpora (the released set)
        header = corpus_header(report)
        # the corpus name is escaped here and again as a cell, as this view always wrote it
        rows = [[_esc(r[0])] + r[1:] for r in corpus_rows(report)]
        out += ["", "### Corpora", ""]
        out += _table(header, rows, "lrr" + "r" * (len(header) - 3))
    if report.paper_comparison:
        from ..sections.paper_comparison import render_lines

        out += ["", "### The paper side by side (released data)", ""]
        out += ["    " + line for line in render_lines(report.paper_comparison)]
    from . import latency_rows

    if found := latency_rows.rows(report):
        out += ["", "### Latency (s) and no response", ""]
        out += _table(["Action / condition"] + latency_rows.HEADER[1:],
                      [[r.label] + latency_rows.cells(r) for r in found],
                      "ll" + "r" * (len(latency_rows.HEADER) - 2))
    if report.robustness:
        from ..sections.robustness import markdown as robustness_table

        out += ["", "### Robustness: I by channel", ""] + robustness_table(report.robustness)

    out += ["", "### Gates", ""]
    gates = report.gate_list()
    if gates:
        out += [f"- {'✅' if g.passed else '❌'} {g.message}" for g in gates]
    else:
        out.append("No gates were set (`--duplexact-gate`).")

    if report.baseline:
        out += ["", "### Baseline comparison", ""] + _baseline(report.baseline)

    if report.cost and report.cost["services"]:
        from ...spend.cost import describe as describe_cost

        head, *lines = describe_cost(report.cost)
        out += ["", "### Cost", "", head, ""] + [f"- {_esc(ln.strip())}" for ln in lines]
    from ...spend.estimate import concurrency_line, versus

    line = versus(report.estimate, report.measured)
    if line:
        out += ["", _esc(line)]
    if (line := concurrency_line(report.measured)) is not None:
        out += ["", _esc(line)]

    out += ["", "### The paper's 14 models (Table 4)", ""] + _paper_table(report)

    if failures:
        out += ["", "### Failed instances", ""] + _failures(report)
    return "\n".join(out) + "\n"


def _baseline(b: dict) -> list[str]:
    from ..sections.baseline import (
        against,
        change_text,
        flip_line,
        newly_measured_line,
        not_measured_text,
        other_not_compared,
        verdict,
    )

    out = [f"{'❌' if not b['passed'] else '✅'} {b['message']}", ""]
    if b.get("path"):
        out.append(f"Baseline: `{b['path']}` ({_esc(against(b))}).")
    if b.get("pairing_note"):
        out.append(f"Comparison: {_esc(b['pairing_note'])}.")
    out.append(f"Method: {b.get('method', '')}.")
    out += [f"- warning: {w}" for w in b.get("warnings", [])]
    lower = [r for r in b["comparisons"] if r["delta"] < 0]
    if lower:
        out += ["", f"Comparisons where this run is lower ({len(lower)} of "
                f"{len(b['comparisons'])}):", ""]
        rows = [[r["target"], f"{100 * r['baseline']['rate']:.1f} ({r['baseline']['n']})",
                 f"{100 * r['current']['rate']:.1f} ({r['current']['n']})",
                 change_text(r), f"{r['p_value']:.2g}", f"{r['p_adjusted']:.2g}",
                 r["test"], "**dropped**" if r["dropped"] else verdict(r, b["alpha"])]
                for r in lower]
        out += _table(["Comparison", "baseline % (n)", "this run % (n)", "\u0394 points", "p",
                       "p (Holm)", "test", "verdict"], rows, "lrrrrrll")
    else:
        out += ["", "No comparison is lower than the baseline."]
    lost = b.get("not_measured_now") or []
    if lost:
        out += ["", f"Measured in the baseline, **not measured now** ({len(lost)}; each fails "
                "the gate):", ""]
        out += [f"- {_esc(not_measured_text(m))}" for m in lost]
    others = other_not_compared(b)
    if others:
        out += ["", f"Not compared ({len(others)}):", ""]
        out += [f"- {_esc(s['target'])}: {_esc(s['why'])}" for s in others]
    if (new := newly_measured_line(b)) is not None:
        out += ["", _esc(new)]
    flips = b.get("flips") or []
    if flips:
        out += ["", "<details>", f"<summary>{len(flips)} flipped instance(s)</summary>", ""]
        out += [f"- {_esc(flip_line(f))}" for f in flips[:MAX_LISTED_FAILURES]]
        if len(flips) > MAX_LISTED_FAILURES:
            out.append(f"- ... and {len(flips) - MAX_LISTED_FAILURES} more (report.json)")
        out += ["", "</details>"]
    return out


def _paper_table(report: Report) -> list[str]:
    out = [f"> {paper_note(report)}", ""]
    rows = paper_rows(report, f"**{report.model_label or 'this run'} (this run)**")
    return out + _table(PAPER_HEADER, rows, "l" + "r" * (len(PAPER_HEADER) - 1))


def _failures(report: Report) -> list[str]:
    bad = [i for i in report.instances if failed(i)]
    if not bad:
        return ["None."]
    out = ["<details>", f"<summary>{len(bad)} failed instance(s)</summary>", ""]
    rows = []
    for inst in bad[:MAX_LISTED_FAILURES]:
        stage, reason = failure_reason(inst)
        rows.append([inst["id"], stage, reason, borderline_text(inst)])
    out += _table(["Instance", "stage", "reason", "borderline (would flip I)"], rows, "llll")
    if len(bad) > MAX_LISTED_FAILURES:
        out.append(f"\n... and {len(bad) - MAX_LISTED_FAILURES} more (the HTML view lists "
                   "every one).")
    out += ["", "</details>"]
    return out
