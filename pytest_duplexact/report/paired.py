"""Paired comparison of two runs on the same instances: what changed, instance by instance.

When both reports hold the same instance ids, each instance is its own control: per action and
per condition, for I and for S, the trials both runs counted form a 2x2 table (success or
failure in the baseline x in this run). The test is McNemar's exact test on the discordant
pairs (stats.mcnemar_exact), the effect the paired difference of rates with Newcombe's hybrid
score interval (stats.paired_difference), and the **flips** are the instances that went from
success to failure or back, with both runs' reasons.

S pairs only instances that entered S in both runs (immediate success in both): an instance
whose I flipped is an I flip, and enters no S pair. Typed reports in (``model.Report``, or
their dicts), plain data out; the baseline gate (baseline.py) Holm-adjusts and decides, the
views render.
"""

from __future__ import annotations

from ..data import taxonomy
from ..data.results import InstanceOutcome
from .aggregate import Counts
from .model import Report
from .stats import Rate, mcnemar_exact, paired_difference

METHOD = ("paired per instance: McNemar's exact test (two-sided binomial test on the "
          "discordant pairs) per action and condition (I and S), p-values Holm-adjusted over "
          "all comparisons; the paired difference of rates with Newcombe's hybrid score 95% "
          "interval")
TEST = "mcnemar-exact"
WORSE, BETTER = "success->failure", "failure->success"
_STAGE = {"I": "immediate", "S": "subsequent"}


class PairingError(ValueError):
    """An instance record that cannot be read; the message names the report and instance."""


def unpairable(current: Report, baseline: Report) -> str | None:
    """Why the two reports cannot be compared instance by instance, or None when they can
    (the same, non-empty set of instance ids)."""
    cur = {d.get("id") for d in current.instances}
    base = {d.get("id") for d in baseline.instances}
    if not cur or not base:
        return "a report holds no instance"
    if cur == base:
        return None
    return (f"the instance sets differ ({len(cur - base)} only in this run, "
            f"{len(base - cur)} only in the baseline, {len(cur & base)} in both)")


def _verdicts(report: Report, which: str) -> dict[str, tuple[dict, dict[str, bool | None]]]:
    """Per instance id: its record (InstanceOutcome.to_dict) and, per metric, success (True /
    False) where the rate counts it, None where it does not (excluded, not judged, an error,
    ...)."""
    out = {}
    for d in report.instances:
        try:
            c = Counts.of(InstanceOutcome.from_dict(d))
        except (KeyError, TypeError, ValueError) as e:
            raise PairingError(f"{which} report: instance {d.get('id')!r}: malformed outcome "
                               f"({type(e).__name__}: {e})") from None
        out[d["id"]] = (d, {"I": bool(c.I_success) if c.n_I else None,
                            "S": bool(c.S_success) if c.n_S else None})
    return out


def borderline_in(cur: dict, base: dict, metric: str) -> list[str]:
    """The runs ("baseline", "current") in which the instance's ``metric`` verdict was
    borderline (rules/borderline.py; only I verdicts can be)."""
    if metric != "I":
        return []
    return [which for which, d in (("baseline", base), ("current", cur))
            if d.get("borderline")]


def targets():
    """(action, condition or None) in taxonomy order, each action before its conditions."""
    for action in taxonomy.ACTIONS:
        yield action, None
        for c in taxonomy.conditions_of(action):
            yield action, c.id


def _reason(d: dict, metric: str) -> str:
    stage = d.get(_STAGE[metric]) or {}
    return str(stage.get("reason") or d.get("error") or "")


def compare(current: Report, baseline: Report, ignore_borderline: bool = False
            ) -> tuple[list[dict], list[dict], list[dict]]:
    """(rows, not_compared, flips). A row per (action | action.condition, metric) with a
    pair: the paired rates, their difference with its interval, the discordant counts and
    McNemar's exact p (unadjusted). ``ignore_borderline``: a flip whose I verdict was
    borderline in either run is set aside (in no pair; the row's ``borderline_ignored``), so
    flips the timeline's edge error could make alone fail nothing. Call only when
    ``unpairable`` is None."""
    cur = _verdicts(current, "current")
    base = _verdicts(baseline, "baseline")
    rows, skipped = [], []
    for action, cond in targets():
        ids = [i for i, (d, _) in cur.items() if d["action"] == action
               and (cond is None or d["condition"] == cond)]
        where = action if cond is None else f"{action}.{cond}"
        for metric in taxonomy.RATE_KINDS:
            table = {"both": 0, "worse": 0, "better": 0, "neither": 0}
            only_cur = only_base = set_aside = 0
            for i in ids:
                c, b = cur[i][1][metric], base[i][1][metric]
                if c is None or b is None:
                    only_cur += c is not None
                    only_base += b is not None
                    continue
                if ignore_borderline and c != b and borderline_in(cur[i][0], base[i][0],
                                                                   metric):
                    set_aside += 1
                    continue
                table["both" if b and c else "worse" if b else "better" if c
                      else "neither"] += 1
            n = sum(table.values())
            target = f"{where}.{metric}"
            if not n:
                if set_aside:
                    skipped.append({"target": target, "why": (
                        f"every pair is a borderline flip, set aside ({set_aside})")})
                elif only_base or only_cur:
                    skipped.append({"target": target, "why": (
                        f"no instance measured in both runs (this run {only_cur}, the "
                        f"baseline {only_base})")})
                continue
            lo, hi = paired_difference(**table)
            rows.append({
                "target": target, "action": action, "condition": cond, "metric": metric,
                "pairs": n,
                "baseline": Rate(table["both"] + table["worse"], n).to_dict(),
                "current": Rate(table["both"] + table["better"], n).to_dict(),
                "delta": (table["better"] - table["worse"]) / n, "ci": [lo, hi],
                "discordant": {"worse": table["worse"], "better": table["better"]},
                "unpaired": only_cur + only_base, "test": TEST,
                "p_value": mcnemar_exact(table["worse"], table["better"]),
                **({"borderline_ignored": set_aside} if ignore_borderline else {})})
    return rows, skipped, flips(cur, base, ignore_borderline)


def flips(cur: dict, base: dict, ignore_borderline: bool = False) -> list[dict]:
    """Every instance whose I or S verdict changed between the runs, in taxonomy order, with
    both runs' reasons and recordings, the runs in which its verdict was borderline and
    whether the gate set it aside for that."""
    order = {c.key: k for k, c in enumerate(taxonomy.CONDITIONS)}
    out = []
    for i, (d, now) in cur.items():
        b, was = base[i]
        for metric in taxonomy.RATE_KINDS:
            if now[metric] is None or was[metric] is None or now[metric] == was[metric]:
                continue
            marked = borderline_in(d, b, metric)
            out.append({"id": i, "action": d["action"], "condition": d["condition"],
                        "scenario": d.get("scenario"), "metric": metric,
                        "direction": WORSE if was[metric] else BETTER,
                        "baseline_reason": _reason(b, metric),
                        "current_reason": _reason(d, metric),
                        "recording": {"baseline": b.get("recording"),
                                      "current": d.get("recording")},
                        "borderline": marked,
                        **({"ignored": bool(marked)} if ignore_borderline else {})})
    out.sort(key=lambda f: (order.get(f"{f['action']}.{f['condition']}", len(order)),
                            f["metric"], f["id"]))
    return out
