"""The one row model every view of a report renders (terminal.py, markdown.py, html.py,
charts.py): a row per action and per condition with its I and S ``Rate`` (n and 95% Wilson
interval), timing and what kept instances out of the rates, the corpora's rows, the paper's
14 models beside this run, the failed instances with their reasons, and the cell formats the
views share. Computed from the typed report only; each view adds its own markup."""

from __future__ import annotations

from dataclasses import dataclass

from ...data import paper as paper_data
from ...data import taxonomy
from ...data.results import flip_text
from .. import timing_cell as fmt_timing  # noqa: F401 (the views' timing cell)
from .. import why_no_rate
from ..aggregate import NA
from ..model import Report
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


def action_rows(report: Report) -> list[ActionRow]:
    """One row per action that ran, in the paper's order."""
    summary = report.summary
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


def condition_rows(report: Report) -> list[ConditionRow]:
    """One row per condition with at least one instance, in the paper's order."""
    summary = report.summary
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


def borderline_counts(report: Report) -> list[tuple[str, int, int]] | None:
    """(action, borderline I verdicts, counted I verdicts) per action that ran; None for a
    report from before borderline verdicts (its counts have no ``borderline_I``)."""
    rows = action_rows(report)
    if any(r.borderline is None for r in rows):
        return None
    return [(r.action, r.borderline, r.I.n) for r in rows]


def borderline_line(report: Report) -> str | None:
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


# --- corpora (released data) ------------------------------------------------------------------

def corpus_header(report: Report) -> list[str]:
    return (["Corpus", "I % [95% CI]", "S % [95% CI]", "n"]
            + [taxonomy.ACTION_LABELS[a] + " I / S" for a in _acts(report)])


def corpus_rows(report: Report) -> list[list[str]]:
    """Per corpus: pooled I and S with their intervals, n, then each action's I / S."""
    summary = report.summary
    acts = _acts(report)
    rows = []
    for corpus, c in summary.corpora.items():
        per = [summary.corpus_counts(a, corpus) for a in acts]
        rows.append([corpus, fmt_rate(rate_of(c, "I")), fmt_rate(rate_of(c, "S")), str(c["n"])]
                    + ["\u2013" if x is None else f"{fmt_rate(rate_of(x, 'I'), ci=False)} / "
                       f"{fmt_rate(rate_of(x, 'S'), ci=False)}" for x in per])
    return rows


def _acts(report: Report) -> list[str]:
    return [a for a in taxonomy.ACTIONS if a in report.summary.actions]


# --- the paper's 14 models beside this run (Table 4) ------------------------------------------

def paper_cell(cell: dict | None, timed: bool) -> str:
    """Table 4's cell: ``I / S`` or ``I / T / S``; '-' where the model was not evaluated."""
    if cell is None:
        return "\u2013"

    def r(v):
        return NA if v is None else f"{100 * v:.1f}"

    if timed:
        t = NA if cell["T"] is None else f"{cell['T']:.2f}"
        return f"{r(cell['I'])} / {t} / {r(cell['S'])}"
    return f"{r(cell['I'])} / {r(cell['S'])}"


def run_action_cell(row: ActionRow | None) -> str:
    """This run's action in Table 4's layout (rates without intervals)."""
    if row is None:
        return "\u2013"
    i, s = fmt_rate(row.I, ci=False), fmt_rate(row.S, ci=False)
    if row.timed:
        t = row.timing
        tt = NA if not t or not t.get("n") else f"{t['median']:.2f}"
        return f"{i} / {tt} / {s}"
    return f"{i} / {s}"


def paper_note(report: Report) -> str:
    """The caveat printed wherever the paper's numbers stand beside a run."""
    from ..sections.judging import s_note

    p = paper_data.load()
    n = report.totals.instances
    judged = f" Its S: {note}." if (note := s_note(report)) else ""
    if n == p.instances:
        return f"{p.note} This run also measured {n} instances.{judged}"
    return (f"{p.note} This run measured {n} instance(s): different data, so the paper's rows "
            f"are context, not a comparison.{judged}")


PAPER_HEADER = ["Model"] + [taxonomy.ACTION_LABELS[a] + (" I / T / S" if a in
                            taxonomy.TIMING_DIAGNOSTIC else " I / S") for a in taxonomy.ACTIONS]


def paper_rows(report: Report, mine: str) -> list[list[str]]:
    """Table 4: this run first (named ``mine``), then each of the paper's models."""
    p = paper_data.load()
    ran = {r.action: r for r in action_rows(report)}
    rows = [[mine] + [run_action_cell(ran.get(a)) for a in taxonomy.ACTIONS]]
    for m in p.models:
        rows.append([m.name] + [paper_cell(p.action(m.name, a), a in taxonomy.TIMING_DIAGNOSTIC)
                                for a in taxonomy.ACTIONS])
    return rows
