"""The terminal view of a report: the paper's Table 4 (per action I / S, T for stop /
interrupt / recover) and Table 16 (per condition "I / S (n_S)") layouts, one model."""

from __future__ import annotations

from .. import taxonomy
from . import timing_cell, why_no_rate
from .stats import rate_of

WIDE_MARK = "~"
WIDE_LEGEND = ("~ = 95% Wilson interval wider than +/-10 points (small n): a rough "
               "indication only (docs/reports.md)")


def pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def marked(c: dict, metric: str) -> str:
    """The rate in %, with WIDE_MARK when its 95% interval is wider than +/-10 points."""
    r = rate_of(c, metric)
    return pct(r.value) + (WIDE_MARK if r.wide else "")


def cell(c: dict | None) -> str:
    """``I / S (n_S)`` as in Table 16; 'n/a' where nothing was measured."""
    if c is None or not c["n"]:
        return "-"
    s = "n/a" if c["S"] is None else f"{marked(c, 'S')} ({c['n_S']})"
    return f"{marked(c, 'I')} / {s}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = []
    for j, r in enumerate(rows):
        out.append("  ".join(v.ljust(w) if k == 0 else v.rjust(w)
                             for k, (v, w) in enumerate(zip(r, widths))).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def action_table(report: dict) -> list[str]:
    rows = [["action", "I", "S (n_S)", "T median (IQR, n)", "n", "valid I", "notes"]]
    for action in taxonomy.ACTIONS:
        a = report["summary"]["actions"].get(action)
        if a is None:
            continue
        c = a["counts"]
        s = "n/a" if c["S"] is None else f"{marked(c, 'S')} ({c['n_S']})"
        t = timing_cell(a["timing"]) if action in taxonomy.TIMING_DIAGNOSTIC else ""
        rows.append([taxonomy.ACTION_LABELS[action], marked(c, "I"), s, t, str(c["n"]),
                     str(c["n_I"]), why_no_rate(c)])
    return _table(rows)


def condition_table(report: dict) -> list[str]:
    rows = [["condition", "I / S (n_S)", "n", "notes"]]
    for cond in taxonomy.CONDITIONS:
        a = report["summary"]["actions"].get(cond.action)
        c = None if a is None else a["conditions"].get(cond.id)
        if c is None or not c["n"]:
            continue
        rows.append([f"{taxonomy.ACTION_LABELS[cond.action]} / {cond.label}", cell(c),
                     str(c["n"]), why_no_rate(c)])
    return _table(rows)


def corpus_table(report: dict) -> list[str]:
    """Per corpus, pooled and per action (only data whose instances name their corpus)."""
    corpora = report["summary"].get("corpora") or {}
    acts = [a for a in taxonomy.ACTIONS if a in report["summary"]["actions"]]
    rows = [["corpus", "all"] + [taxonomy.ACTION_LABELS[a] for a in acts]]
    for corpus, c in corpora.items():
        rows.append([corpus, cell(c)] + [cell(report["summary"]["actions"][a].get(
            "corpora", {}).get(corpus)) for a in acts])
    return _table(rows)


def render(report: dict, gate_results=()) -> list[str]:
    model = report.get("model", "?")
    out = ["", f"DuplexAct results for {model}  (I, S in %; T in s)"]
    out += action_table(report)
    out += ["", "Per condition (paper Table 16 layout: I / S (n_S))"]
    out += condition_table(report)
    if report["summary"].get("corpora"):
        out += ["", "Per corpus (I / S (n_S))"] + corpus_table(report)
    if report.get("paper_comparison"):
        from ..released.paper import render_lines

        out += [""] + render_lines(report["paper_comparison"])
    if any(WIDE_MARK in line for line in out):
        out.append(WIDE_LEGEND)
    tot = report["totals"]
    if tot["errors"]:
        out.append(f"{tot['errors']} instance(s) ended in a harness/model error and enter no "
                   "rate (see the errors above).")
    if report.get("usage"):
        from ..usage import describe

        out += ["", "Remote services (models used, calls, cache):"] + describe(report["usage"])
    if report.get("cost"):
        from .cost import describe as describe_cost

        out += describe_cost(report["cost"])
    for note in report.get("notes", []):
        out.append(note)
    if gate_results:
        out += ["", "Gates:"]
        out += [f"  {g.message}" for g in gate_results]
    if report.get("baseline"):
        from .baseline import render_lines

        out += ["", "Baseline:"]
        out += [f"  {line}" for line in render_lines(report["baseline"])]
    return out
