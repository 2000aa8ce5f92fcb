"""Latency as a distribution (aggregate.Latency): the rows the terminal, Markdown and HTML
views show, per action and per condition, beside the paper's medians where its Table 15 gives
them (the range of its models' medians for that condition, or pooled over its conditions)."""

from __future__ import annotations

from dataclasses import dataclass

from ...data import taxonomy
from ..model import Report

WHAT = {"take_turn": "onset after the user's end", "backchannel": "onset after the point",
        "stop": "yield latency", "interrupt": "timing vs target",
        "recover": "latency after the cue"}


@dataclass(frozen=True)
class LatencyRow:
    action: str
    condition: str | None  # None: pooled over the action's conditions
    label: str
    latency: dict  # aggregate.Latency.to_dict
    paper: tuple[float, float] | None  # (lowest, highest) median of the paper's models


def paper_range(action: str, condition: str | None) -> tuple[float, float] | None:
    from ...data.paper import load

    t15 = load().table15
    keys = ([f"{action}.{condition}"] if condition else
            [f"{action}.{c.id}" for c in taxonomy.conditions_of(action)])
    medians = [cell["median"] for cells in t15.values() for k in keys
               if (cell := cells.get(k)) and cell.get("median") is not None]
    return (min(medians), max(medians)) if medians else None


def rows(report: Report) -> list[LatencyRow]:
    summary = report.summary
    out = []
    for action in taxonomy.ACTIONS:
        pooled = summary.latency(action)
        if not pooled:
            continue
        label = taxonomy.ACTION_LABELS[action]
        out.append(LatencyRow(action, None, label, pooled, paper_range(action, None)))
        conds = summary.action(action).get("condition_latency") or {}
        for cond in taxonomy.conditions_of(action):
            if (lat := conds.get(cond.id)) is None:
                continue
            cid = cond.id
            out.append(LatencyRow(action, cid, f"{label} / {cond.label}", lat,
                                  paper_range(action, cid)))
    return out


def _s(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def cells(row: LatencyRow) -> list[str]:
    """measure, p10, p50, p90, n, no response, paper medians."""
    lat = row.latency
    nr = lat.get("no_response")
    no_resp = "-" if nr is None else f"{100 * nr:.0f}% ({lat['silent']}/{lat['trials']})"
    paper = "" if row.paper is None else (
        f"{row.paper[0]:.2f}" if row.paper[0] == row.paper[1] else
        f"{row.paper[0]:.2f} .. {row.paper[1]:.2f}")
    what = WHAT.get(row.action, "") if row.condition is None else ""
    return [what, _s(lat.get("p10")), _s(lat.get("p50")), _s(lat.get("p90")),
            str(lat.get("n", 0)), no_resp, paper]


HEADER = ["", "measure", "p10", "p50", "p90", "n", "no response", "paper medians"]


def deltas(a: Report, b: Report) -> list[dict]:
    """Per action and condition measured in either run: each run's p50 (s) with its n and
    no-response rate, and B's p50 minus A's (None unless both have one). A descriptive
    change: latency has no paired test here."""
    rows_a = {(r.action, r.condition): r for r in rows(a)}
    rows_b = {(r.action, r.condition): r for r in rows(b)}
    out = []
    for key in list(rows_a) + [k for k in rows_b if k not in rows_a]:
        ra, rb = rows_a.get(key), rows_b.get(key)
        la, lb = (ra.latency if ra else {}), (rb.latency if rb else {})
        pa, pb = la.get("p50"), lb.get("p50")
        out.append({"action": key[0], "condition": key[1], "label": (ra or rb).label,
                    "a": {"p50": pa, "n": la.get("n", 0), "no_response": la.get("no_response")},
                    "b": {"p50": pb, "n": lb.get("n", 0), "no_response": lb.get("no_response")},
                    "delta_p50": None if pa is None or pb is None else round(pb - pa, 6)})
    return out


def _nr(side: dict) -> str:
    return "-" if side["no_response"] is None else f"{100 * side['no_response']:.0f}%"


def delta_cells(d: dict) -> list[str]:
    """A p50 (n), B p50 (n), change, A / B no response."""
    change = "-" if d["delta_p50"] is None else f"{d['delta_p50']:+.2f}"
    return [f"{_s(d['a']['p50'])} ({d['a']['n']})", f"{_s(d['b']['p50'])} ({d['b']['n']})",
            change, f"{_nr(d['a'])} / {_nr(d['b'])}"]


DELTA_HEADER = ["latency", "A p50 s (n)", "B p50 s (n)", "change", "no response A / B"]
