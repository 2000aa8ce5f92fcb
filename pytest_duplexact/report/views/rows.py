"""The one row model every view of a report renders (terminal.py, markdown.py, html.py): a row
per action and per condition with its I and S ``Rate`` (n and 95% Wilson interval), timing and
what kept instances out of the rates, the failed instances with their reasons, and the cell
formats the views share. Computed from the JSON report only."""

from __future__ import annotations

from dataclasses import dataclass

from ...data import taxonomy
from ...data.results import flip_text
from .. import timing_cell as fmt_timing  # noqa: F401 (the views' timing cell)
from .. import why_no_rate
from ..aggregate import NA
from ..model import Report, as_report
from ..stats import Rate, rate_of


@dataclass(frozen=True)
class ActionRow:
    action: str
    label: str
    I: Rate  # noqa: E741 - the paper's name
    S: Rate
    timing: dict | None  # the report's timing dict, for actions with a diagnostic
    timed: bool  # the action has a timing diagnostic (taxonomy.TIMING_DIAGNOSTIC)
    n: int
    notes: str  # what kept instances out of the rates (why_no_rate)
    borderline: int | None = None  # borderline I verdicts; None: the report predates them


@dataclass(frozen=True)
class ConditionRow:
    key: str
    action: str
    condition: str
    action_label: str
    label: str
    I: Rate  # noqa: E741
    S: Rate
    timing: dict | None
    n: int
    notes: str


def fmt_rate(r: Rate, ci: bool = True) -> str:
    """``81.5 [72.1-88.3]`` in percent; ``~`` marks an interval wider than +/-10 points."""
    if r.value is None:
        return NA
    text = f"{100 * r.value:.1f}"
    if ci:
        text += f" [{100 * r.lo:.1f}\u2013{100 * r.hi:.1f}]"
    return text + ("~" if r.wide else "")


def fmt_rate_value(v: float | None) -> str:
    """A fraction as a percentage with one decimal, or n/a."""
    return NA if v is None else f"{100 * v:.1f}"


def action_rows(report: Report | dict) -> list[ActionRow]:
    """One row per action that ran, in the paper's order."""
    summary = as_report(report).summary
    rows = []
    for action in taxonomy.ACTIONS:
        c = summary.counts(action)
        if c is None:
            continue
        timed = action in taxonomy.TIMING_DIAGNOSTIC
        rows.append(ActionRow(action, taxonomy.ACTION_LABELS[action], rate_of(c, "I"),
                              rate_of(c, "S"), summary.timing(action) if timed else None, timed,
                              c["n"], why_no_rate(c), c.get("borderline_I")))
    return rows


def condition_rows(report: Report | dict) -> list[ConditionRow]:
    """One row per condition with at least one instance, in the paper's order."""
    summary = as_report(report).summary
    rows = []
    for cond in taxonomy.CONDITIONS:
        c = summary.counts(cond.action, cond.id)
        if c is None or not c["n"]:
            continue
        rows.append(ConditionRow(cond.key, cond.action, cond.id,
                                 taxonomy.ACTION_LABELS[cond.action], cond.label,
                                 rate_of(c, "I"), rate_of(c, "S"),
                                 summary.timing(cond.action, cond.id), c["n"], why_no_rate(c)))
    return rows


def failed(inst: dict) -> bool:
    """An instance that needs a look: a failed stage, a judge error or a harness error."""
    if inst.get("error"):
        return True
    bad = ("failure", "judge_error")
    return any(inst.get(stage) and inst[stage]["verdict"] in bad
               for stage in ("immediate", "subsequent"))


def failure_reason(inst: dict) -> tuple[str, str]:
    """(stage, reason) of a failed instance, the earliest stage first."""
    if inst.get("error"):
        return "error", inst["error"]
    for stage, label in (("immediate", "I"), ("subsequent", "S")):
        r = inst.get(stage)
        if r and r["verdict"] in ("failure", "judge_error"):
            tag = label if r["verdict"] == "failure" else f"{label} (judge error)"
            return tag, r["reason"]
    return "", ""


# --- borderline verdicts (rules/borderline.py) ------------------------------------------------

BORDERLINE_WHAT = (f"an edge moved \u00b1{taxonomy.BORDERLINE_EDGE_S:.2f} s or one word more "
                   "or fewer at the 3-word line flips them")


def borderline_counts(report: Report | dict) -> list[tuple[str, int, int]] | None:
    """(action, borderline I verdicts, counted I verdicts) per action that ran; None for a
    report from before borderline verdicts (its counts have no ``borderline_I``)."""
    rows = action_rows(report)
    if any(r.borderline is None for r in rows):
        return None
    return [(r.action, r.borderline, r.I.n) for r in rows]


def borderline_line(report: Report | dict) -> str | None:
    """``Borderline I verdicts (...): take_turn 7 of 24, wait 0 of 12``; None when the report
    does not know them."""
    counts = borderline_counts(report)
    if not counts:
        return None
    per = ", ".join(f"{a} {k} of {n}" for a, k, n in counts if n)
    if not per:
        return None
    return f"Borderline I verdicts ({BORDERLINE_WHAT}): {per}"


def borderline_flips(inst: dict) -> list[dict]:
    """An instance record's borderline flips (none for a verdict that is not borderline)."""
    return list(inst.get("borderline") or [])


def borderline_text(inst: dict, limit: int = 3) -> str:
    """What would flip the instance's I verdict, the first ``limit`` perturbations."""
    flips = borderline_flips(inst)
    more = f" (+{len(flips) - limit} more)" if len(flips) > limit else ""
    return "; ".join(flip_text(f) for f in flips[:limit]) + more
