"""The robustness section (docs/channels.md): one model's runs of the same data and scoring
under every channel the run store holds (``--duplexact-channel``), side by side: action x
channel I rates with their 95% Wilson intervals and, against the clean run, the paired
comparison of baseline.py (McNemar's exact test, Holm-adjusted) and its flips. ``*`` marks a
significant drop, ``+`` a significant gain. Its Markdown table is ready for a model card.

Built from reports: the run's own and the stored ones (store.py) of the same model, model
options, data and scoring (settings.comparable_changes), shards left out; per channel the
newest one."""

from __future__ import annotations

import sys
from typing import Iterable

from ...data import taxonomy
from ..model import Report
from ..stats import rate_of

CLEAN = "clean"


def channel_of(report: Report) -> str:
    return (report.settings or {}).get("channel") or CLEAN


def _same_run_kind(a: Report, b: Report) -> bool:
    from ...run.settings import RunSettings, SettingsError

    try:
        sa, sb = RunSettings.from_dict(a.settings), RunSettings.from_dict(b.settings)
    except (SettingsError, TypeError, KeyError):
        return False
    return (sa.model == sb.model and sa.model_options == sb.model_options
            and not sa.comparable_changes(sb))


def _shard(report: Report) -> bool:
    """One shard of a run (--duplexact-shard): a part of its channel's run, never the run;
    its merge (``duplexact merge``) is."""
    sel = (report.settings or {}).get("selection")
    return isinstance(sel, dict) and sel.get("shard") is not None


def section(current: Report, stored: Iterable[Report],
            alpha: float = 0.05) -> dict | None:
    """The section over ``current`` and the ``stored`` reports like it; None unless they hold
    more than one channel."""
    from .baseline import compare

    newest: dict[str, Report] = {}
    for rep in stored:
        if not _same_run_kind(current, rep) or _shard(rep):
            continue
        ch = channel_of(rep)
        if ch not in newest or str(rep.created or "") > str(newest[ch].created or ""):
            newest[ch] = rep
    newest[channel_of(current)] = current
    if len(newest) < 2:
        return None
    order = sorted(newest, key=lambda c: (c != CLEAN, c))
    clean = newest.get(CLEAN)
    actions = [a for a in taxonomy.ACTIONS if any(r.summary.counts(a) for r in newest.values())]
    rows = []
    for ch in order:
        rep = newest[ch]
        versus = compare(rep, clean, alpha) if clean is not None and ch != CLEAN else None
        tests = {r["target"]: r for r in (versus or {}).get("comparisons", ())}
        cells = {}
        for a in actions:
            r = rate_of(rep.summary.counts(a), "I")
            low, high = r.interval or (None, None)
            t = tests.get(f"{a}.I")
            cells[a] = {"rate": r.value, "n": r.n, "low": low, "high": high,
                        "p_adjusted": None if t is None else t["p_adjusted"],
                        "mark": "" if t is None or t["p_adjusted"] >= alpha else
                        ("*" if t["delta"] < 0 else "+")}
        flips = (versus or {}).get("flips", [])
        rows.append({"channel": ch, "created": rep.created, "actions": cells,
                     "pairing": None if versus is None else versus["pairing"],
                     "flips_to_failure": sum(f["direction"] == "success->failure"
                                             for f in flips),
                     "flips_to_success": sum(f["direction"] == "failure->success"
                                             for f in flips)})
    return {"reference": CLEAN if clean is not None else None, "alpha": alpha,
            "actions": actions, "channels": rows}


def cell(c: dict) -> str:
    if c["rate"] is None:
        return "n/a"
    return (f"{100 * c['rate']:.0f}{c['mark']} [{100 * c['low']:.0f}, {100 * c['high']:.0f}]"
            f" ({c['n']})")


def markdown(sec: dict) -> list[str]:
    """The action x channel table (I in %, [95% CI], (n)); ``*`` / ``+``: a significant drop
    / gain against the clean run (paired McNemar, Holm-adjusted); the flips."""
    acts = sec["actions"]
    out = ["| channel | " + " | ".join(taxonomy.ACTION_LABELS[a] for a in acts)
           + " | flips (to failure / to success) |",
           "|" + " --- |" * (len(acts) + 2)]
    for row in sec["channels"]:
        flips = "" if row["pairing"] is None else \
            f"{row['flips_to_failure']} / {row['flips_to_success']}"
        out.append(f"| `{row['channel']}` | " + " | ".join(cell(row["actions"][a])
                                                          for a in acts) + f" | {flips} |")
    ref = "the clean run" if sec["reference"] else "no clean run stored: no test"
    out.append(f"\nI in % [95% Wilson CI] (n); * / + = significantly lower / higher than "
               f"{ref} (paired McNemar, Holm-adjusted, alpha {sec['alpha']:g}).")
    return out


def terminal_lines(report: Report) -> list[str]:
    sec = report.robustness
    if not sec:
        return []
    return ["", "Robustness: I by channel (this model, these data; docs/channels.md)"] + \
        markdown(sec)


def main(args) -> int:
    """``duplexact robustness REPORT [REPORT ...] [--store DIR]``: the table over these reports
    (the first one's model and data) and the store's."""
    from pathlib import Path

    from .. import MALFORMED, read_report, refuse

    try:
        reports = [Report.from_json(read_report(p)) for p in args.reports]
    except MALFORMED as e:
        return refuse("robustness", e)
    if args.store and not Path(args.store).is_dir():  # a typo read as "no other channel"
        from ...data.suggest import not_a_folder

        print(f"duplexact robustness: --store {args.store}: {not_a_folder(args.store)}; give "
              "the run store (--duplexact-storage's folder, default .duplexact)",
              file=sys.stderr)
        return 2
    stored = stored_reports(Path(args.store)) if args.store else []
    sec = section(reports[0], reports[1:] + stored, args.alpha)
    if sec is None:
        where = f" and the store {args.store}" if args.store else ""
        print(f"only one channel among these runs{where} of this model and data: run it "
              "again with --duplexact-channel=SPEC (docs/channels.md)")
        return 0
    print("\n".join(markdown(sec)))
    return 0


def stored_reports(store) -> list[Report]:
    """Every readable report of the run store (store.py); an unreadable one is skipped."""
    from .. import MALFORMED, read_report
    from ..store.saved import entries

    out = []
    for _, path in entries(store):
        try:
            out.append(Report.from_json(read_report(path, ("model", "settings", "summary",
                                                    "instances"))))
        except MALFORMED:
            continue
    return out
