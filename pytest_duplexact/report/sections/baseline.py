"""Regression gate: compare a run with a stored report, per action and per condition, I and S.

Two ways, chosen by the data (the section's ``pairing`` says which was used):

- **paired**, when both reports hold the same instances (paired.py): per instance, McNemar's
  exact test on the discordant pairs, the paired difference with Newcombe's interval, and
  the flips (instances that went from success to failure and back) with both runs' reasons;
- **unpaired**, the fallback when the instance sets differ: one-sided test of H1 "current
  rate < baseline rate" (Fisher's exact test when an expected count is below 5, the pooled
  two-proportion z-test otherwise; stats.drop_test).

Either way the p-values are Holm-corrected over every comparison made, so ``alpha`` bounds the
chance that an unchanged model fails the gate at all (a run makes ~60 comparisons;
uncorrected, a few would come out "significant" by chance on most re-runs of a stochastic
model). A comparison dropped when the current rate is lower and its adjusted p is below alpha.

A rate the baseline measured that this run ran instances for and measured on none (a model
gone silent: every stop, hold_floor and recover trial excluded) fails the gate too, as "not
measured now (was X%)" (``not_measured_now``): nothing can be tested, and a release gate must
not pass it silently. A group this run did not run at all (another selection) is only listed
under ``not_compared``.

The result is plain data (the report's ``baseline`` section, docs/reports.md).
"""

from __future__ import annotations

from pathlib import Path

from ...data import taxonomy
from ...run.settings import RunSettings, SettingsError
from .. import ReportFileError, paired, read_report, typed_report
from ..model import Report
from ..stats import drop_test, holm, mcnemar_exact, rate_of
from .count_checks import count_problems
from .judging import section as judges_of

DEFAULT_ALPHA = 0.05
METHOD = ("unpaired one-sided test of a drop per action and condition (I and S): Fisher's "
          "exact test when an expected count is below 5, else the pooled two-proportion "
          "z-test; p-values Holm-adjusted over all comparisons")


class BaselineError(ReportFileError):
    pass


def load(path: str | Path) -> Report:
    """A stored report, checked enough to compare against, parsed once; BaselineError names
    the file. The checks read the file as stored (what it is, before it is a report)."""
    d = read_report(path, ("summary", "settings"), BaselineError, label="baseline ")
    for key in ("summary", "settings"):
        if not isinstance(d.get(key), dict):
            raise BaselineError(f"baseline {path}: field {key!r} is missing")
    if not isinstance(d["summary"].get("actions"), dict):
        raise BaselineError(f"baseline {path}: field 'summary.actions' is missing")
    bad = next(count_problems(d["summary"]["actions"]), None)  # the first, by field
    if bad:
        raise BaselineError(f"baseline {path}: field '{bad[0]}' {bad[1]}")
    return typed_report(d, f"baseline {path}", BaselineError)


def _counts(report: Report, action: str, condition: str | None) -> dict | None:
    return report.summary.counts(action, condition)


def _settings(report: Report, which: str) -> RunSettings:
    try:
        return RunSettings.from_dict(report.settings)
    except SettingsError as e:
        raise BaselineError(f"{which} report: {e}") from None


def _warnings(current: Report, baseline: Report) -> list[str]:
    out = []
    cs, bs = _settings(current, "current"), _settings(baseline, "baseline")
    if current.model_label != baseline.model_label or cs.options != bs.options:
        out.append(f"the models differ (baseline {_model_text(baseline, bs)}, this run "
                   f"{_model_text(current, cs)}): a comparison of two models, not of one "
                   "model with itself")
    for key in cs.comparable_changes(bs):
        what = "the dataset differs" if key == "dataset_fingerprint" else \
            f"{key}: {getattr(bs, key)!r} -> {getattr(cs, key)!r}"
        out.append(f"settings differ from the baseline ({what}); the rates may not be "
                   "comparable")
    kinds = [{k: j.get("endpoint") for k, j in (judges_of(r.usage) or {}).items()
              if isinstance(j, dict)} for r in (baseline, current)]
    if all(kinds) and kinds[0] != kinds[1]:  # (a judge on one side only: 'judge' differs)
        out.append(f"the judges were served by other kinds of server (baseline {kinds[0]}, "
                   f"this run {kinds[1]}); the S rates may not be comparable")
    if cs.unsharded().selection != bs.unsharded().selection:
        out.append("the instance selection differs from the baseline's; only groups measured "
                   "in both runs are compared")
    return out


def _model_text(report: Report, s: RunSettings) -> str:
    opts = ", ".join(f"{k}={v}" for k, v in s.model_options)
    return f"{report.model_label}" + (f" [{opts}]" if opts else "")


def _unpaired(current: Report, baseline: Report) -> tuple[list[dict], list[dict]]:
    """Each rate tested as if the two runs had measured different instances."""
    rows, skipped = [], []
    for action, cond in paired.targets():
        where = action if cond is None else f"{action}.{cond}"
        cur_c, base_c = _counts(current, action, cond), _counts(baseline, action, cond)
        for metric in taxonomy.RATE_KINDS:
            cur, base = rate_of(cur_c, metric), rate_of(base_c, metric)
            target = f"{where}.{metric}"
            if base.n and not cur.n:
                skipped.append({"target": target, "why": "measured in the baseline "
                                f"(n={base.n}), not in this run"})
                continue
            if cur.n and not base.n:
                skipped.append({"target": target, "why": "not measured in the baseline"})
                continue
            if not cur.n:
                continue
            test, p = drop_test(base.successes, base.n, cur.successes, cur.n)
            rows.append({"target": target, "action": action, "condition": cond,
                         "metric": metric, "baseline": base.to_dict(),
                         "current": cur.to_dict(), "delta": cur.value - base.value,
                         "test": test, "p_value": p})
    return rows, skipped


def compare(current: Report, baseline: Report, alpha: float = DEFAULT_ALPHA,
            path: str | None = None, ignore_borderline: bool = False) -> dict:
    """The report's ``baseline`` section: every comparison with its p-values, which dropped,
    whether the run passes (no significant drop), and, paired, the flips.
    ``ignore_borderline``: paired, flips whose I verdict was borderline in either run are set
    aside (paired.compare), so they alone never fail the gate."""
    if not 0.0 < alpha < 1.0:
        raise BaselineError(f"baseline alpha must be in (0, 1), got {alpha}")
    why = paired.unpairable(current, baseline)
    flips: list[dict] = []
    if why is None:
        try:
            rows, skipped, flips = paired.compare(current, baseline, ignore_borderline)
        except paired.PairingError as e:  # name the file, as every baseline error does
            raise BaselineError(f"{path}: {e}" if path else str(e)) from None
        pairing, method = "paired", paired.METHOD
        note = f"paired on the {len(current.instances)} instance(s) both runs share"
    else:
        rows, skipped = _unpaired(current, baseline)
        pairing, method = "unpaired", METHOD
        note = f"unpaired: {why}, so each rate is tested as if the runs measured different " \
               "instances"
    ps = [r["p_value"] for r in rows]
    for k, (row, adj) in enumerate(zip(rows, holm(ps))):
        row["p_adjusted"] = adj
        row["dropped"] = row["delta"] < 0 and adj < alpha
        # power: the Holm p of the largest drop these n allow (every baseline success lost)
        row["p_floor"] = holm(ps[:k] + [_largest_drop_p(row)] + ps[k + 1:])[k]
    drops = [r["target"] for r in rows if r["dropped"]]
    lost = _not_measured_now(current, baseline)
    section = {
        "path": path, "model": baseline.model_label, "created": baseline.created,
        "dataset_fingerprint": baseline.dataset_fingerprint,
        "alpha": alpha, "pairing": pairing, "pairing_note": note, "method": method,
        "comparisons": rows, "not_compared": skipped, "flips": flips, "drops": drops,
        "not_measured_now": lost, "newly_measured": _newly_measured(current, baseline),
        "warnings": _warnings(current, baseline), "passed": not drops and not lost,
    }
    if ignore_borderline:  # only when asked, so other sections keep their bytes
        section["ignore_borderline"] = True
        if pairing != "paired":
            section["warnings"].append(
                "borderline flips can be set aside only when both runs hold the same "
                "instances (paired); this comparison counts them")
    section["message"] = summary_line(section)
    return section


def _largest_drop_p(row: dict) -> float:
    """The one-sided p of the largest drop possible at this comparison's n: every baseline
    success lost (paired: that many worse pairs, none better)."""
    b, c = row["baseline"], row["current"]
    if row["test"] == paired.TEST:
        return mcnemar_exact(b["successes"], 0)
    return drop_test(b["successes"], b["n"], 0, c["n"])[1]


def blind(row: dict, alpha: float) -> bool:
    """Lower, not significant, and no drop at this n could have been: too few instances to
    tell a drop from chance (a row from a report before ``p_floor``: never)."""
    return row["delta"] < 0 and not row["dropped"] and row.get("p_floor", 0.0) >= alpha


def verdict(row: dict, alpha: float) -> str:
    """A comparison's verdict as every view words it."""
    if row["dropped"]:
        return "DROPPED"
    if row["delta"] >= 0:
        return ""
    return "lower, too few to tell" if blind(row, alpha) else "lower, within chance"


def power_lines(section: dict) -> list[str]:
    """One line naming the lower comparisons whose n could not have shown any drop (none when
    there are none), each with the smallest Holm p its n allows."""
    few = [r for r in section["comparisons"] if blind(r, section["alpha"])]
    if not few:
        return []
    shown = "; ".join(
        f"{r['target']}: " + (f"{r['pairs']} pairs" if "pairs" in r else
                              f"n {r['baseline']['n']} -> {r['current']['n']}")
        + f", at best p {r['p_floor']:.2g}" for r in few[:_MAX_POWER])
    more = f"; and {len(few) - _MAX_POWER} more" if len(few) > _MAX_POWER else ""
    return [f"too few to tell ({len(few)}): even losing every baseline success would not "
            f"reach alpha {section['alpha']:g} after Holm ({shown}{more}); more instances "
            "(--duplexact-limit, the released data) give the test its power"]


_MAX_POWER = 5  # comparisons named in the power line


def _newly_measured(current: Report, baseline: Report) -> list[dict]:
    """The rates this run measured and the baseline did not (a condition new to the run)."""
    out = []
    for action, cond in paired.targets():
        where = action if cond is None else f"{action}.{cond}"
        for metric in taxonomy.RATE_KINDS:
            cur = rate_of(_counts(current, action, cond), metric)
            if cur.n and not rate_of(_counts(baseline, action, cond), metric).n:
                out.append({"target": f"{where}.{metric}", "current": cur.to_dict()})
    return out


# why a group's trials are in no rate: (Counts key, text); a key's ``_S`` part is the
# subsequent stage's share, the rest the immediate stage's (docs/report-format.md, Counts)
_UNSCORED = (("errors", "ended in an error"),
             ("excluded", "excluded (the cue never met model speech)"),
             ("not_judged", "not judged (no judge configured)"),
             ("judge_errors", "with no usable judge answer"),
             ("not_applicable", "not applicable"))


def _unscored_why(counts, metric: str) -> str:
    """Why none of a group's instances is in its I or S rate, from its Counts."""
    parts = []
    if metric == "S" and int(counts.get("n_I") or 0) > int(counts.get("I_success") or 0):
        parts.append(f"{int(counts['n_I']) - int(counts['I_success'])} immediate failure(s) "
                     "(no follow-through to judge)")
    for key, text in _UNSCORED:
        whole, s_part = int(counts.get(key) or 0), int(counts.get(f"{key}_S") or 0)
        if key in ("errors", "excluded"):  # no stage of its own: out of both rates
            k = whole
        else:
            k = s_part if metric == "S" else whole - s_part
        if k:
            parts.append(f"{k} {text}")
    return (f"its {int(counts['n'])} instance(s) ran and none was scored"
            + (": " + ", ".join(parts) if parts else ""))


def _not_measured_now(current: Report, baseline: Report) -> list[dict]:
    """The rates the baseline measured whose instances this run ran and scored none of: each
    with the baseline's rate and why (a failure of the gate). A group with no instance in
    this run (not selected) is not one: it is only listed under ``not_compared``."""
    out = []
    for action, cond in paired.targets():
        where = action if cond is None else f"{action}.{cond}"
        cur_c = _counts(current, action, cond)
        if not cur_c or not int(cur_c.get("n") or 0):
            continue
        for metric in taxonomy.RATE_KINDS:
            base = rate_of(_counts(baseline, action, cond), metric)
            if base.n and not rate_of(cur_c, metric).n:
                out.append({"target": f"{where}.{metric}", "baseline": base.to_dict(),
                            "why": _unscored_why(cur_c, metric)})
    return out


def not_measured_text(m: dict, where: str = "now") -> str:
    """``stop.I: not measured now (was 100.0%, n 3); its 3 instance(s) ran and none was
    scored: 3 excluded (...)``; ``where`` names the run that lost it (``duplexact compare``:
    ``in B``)."""
    b = m["baseline"]
    return (f"{m['target']}: not measured {where} (was {100 * b['rate']:.1f}%, n {b['n']}); "
            f"{m['why']}")


def other_not_compared(section: dict) -> list[dict]:
    """``not_compared`` less what the views show elsewhere (the rates not measured now, the
    newly measured ones)."""
    shown = {m["target"] for m in (section.get("not_measured_now") or [])
             + (section.get("newly_measured") or [])}
    return [s for s in section.get("not_compared") or [] if s["target"] not in shown]


def newly_measured_line(section: dict, where: str = "(not in the baseline)") -> str | None:
    """The rates measured now that the baseline has not; ``where`` says so in the caller's
    words (``duplexact compare``: "in B (not in A)")."""
    new = section.get("newly_measured") or []
    if not new:
        return None
    return f"newly measured {where}: " + ", ".join(
        f"{m['target']} {100 * m['current']['rate']:.1f}% (n {m['current']['n']})"
        for m in new)


def against(section: dict) -> str:
    """What the run was compared with: ``oracle (2026-12-01T15:29:32Z, dataset
    48d078362caa)``."""
    fp = section.get("dataset_fingerprint")
    return (f"{section.get('model')} ({section.get('created')}, dataset "
            f"{str(fp)[:12] if fp else 'unknown'})")


def change_text(row: dict) -> str:
    """``-100.0 points [95% CI -100.0, -61.0]; 6 pairs: 6 worse, 0 better`` (paired) or
    ``-100.0 points; n 9 -> 9`` (unpaired)."""
    b, c = row["baseline"], row["current"]
    if "ci" not in row:
        return f"{100 * row['delta']:+.1f} points; n {b['n']} -> {c['n']}"
    lo, hi = row["ci"]
    d = row["discordant"]
    return (f"{100 * row['delta']:+.1f} points [95% CI {100 * lo:+.1f}, {100 * hi:+.1f}]; "
            f"{row['pairs']} pairs: {d['worse']} worse, {d['better']} better")


def describe(row: dict) -> str:
    """``take_turn.delayed.I: 100.0% -> 0.0% (-100.0 points; n 9 -> 9), p = 2.1e-05
    (Holm 4.1e-05, fisher)``."""
    b, c = row["baseline"], row["current"]
    return (f"{row['target']}: {100 * b['rate']:.1f}% -> {100 * c['rate']:.1f}% "
            f"({change_text(row)}), "
            f"p = {row['p_value']:.2g} (Holm {row['p_adjusted']:.2g}, {row['test']})")


def summary_line(section: dict) -> str:
    n = len(section["comparisons"])
    how = (f"{section.get('pairing', 'unpaired')}; alpha {section['alpha']:g}, "
           "Holm-adjusted")
    lost = [m["target"] for m in section.get("not_measured_now") or []]
    if section["drops"] and not lost:
        return (f"FAILED baseline: {len(section['drops'])} of {n} comparison(s) dropped "
                f"significantly against {against(section)} ({how}): "
                + ", ".join(section["drops"]))
    if lost:
        named = ", ".join(lost[:_MAX_LOST]) + (
            f" and {len(lost) - _MAX_LOST} more" if len(lost) > _MAX_LOST else "")
        dropped = (f"{len(section['drops'])} of {n} comparison(s) dropped significantly ("
                   + ", ".join(section["drops"]) + "), and " if section["drops"] else "")
        return (f"FAILED baseline: {dropped}{len(lost)} rate(s) measured in the baseline are "
                f"not measured now ({named}) against {against(section)} ({how})")
    lower = sum(r["delta"] < 0 for r in section["comparisons"])
    few = too_few(section)
    if few:  # a drop these n could not have shown is not a pass: it is unjudged
        shown = ", ".join(few[:3]) + (f" and {len(few) - 3} more" if len(few) > 3 else "")
        return (f"too few to tell: {len(few)} of {n} comparison(s) lower on too few "
                f"instances to show any drop ({shown}); no significant drop against "
                f"{against(section)} ({how}; {lower} lower)")
    how += f"; {lower} lower but within chance"
    return (f"passed baseline: no significant drop in {n} comparison(s) against "
            f"{against(section)} ({how})")


_MAX_LOST = 6  # rates not measured now named in the verdict line


def borderline_note(f: dict) -> str:
    """`` [borderline in the baseline and this run; set aside]``, or nothing."""
    runs = f.get("borderline") or []
    if not runs:
        return ""
    where = " and ".join("the baseline" if r == "baseline" else "this run" for r in runs)
    return f" [borderline in {where}{'; set aside' if f.get('ignored') else ''}]"


def too_few(section: dict) -> list[str]:
    """The lower comparisons whose n could not have shown any drop."""
    return [r["target"] for r in section.get("comparisons") or ()
            if blind(r, section["alpha"])]


def css_class(section: dict) -> str:
    """How a view colours the verdict: green only for a pass these n could have failed."""
    if not section["passed"]:
        return "fail"
    return "unsure" if too_few(section) else "pass"


def flip_line(f: dict) -> str:
    """``take_turn.delayed-casual-01 I success->failure: <baseline reason> -> <this run's>``,
    marked when the verdict was borderline in either run."""
    return (f"{f['id']} {f['metric']} {f['direction']}: was \"{f['baseline_reason']}\"; now "
            f"\"{f['current_reason']}\"{borderline_note(f)}")


MAX_FLIP_LINES = 20  # the terminal lists this many flips; report.json and the HTML page all


def render_lines(section: dict) -> list[str]:
    """Terminal lines: the verdict, how it compared, every significant drop, the flips,
    warnings."""
    out = [section["message"], f"  {section.get('pairing_note') or section.get('method', '')}"]
    out += ["  dropped " + describe(r) for r in section["comparisons"] if r["dropped"]]
    out += ["  " + not_measured_text(m) for m in section.get("not_measured_now") or []]
    fl = section.get("flips") or []
    if fl:
        worse = sum(f["direction"] == paired.WORSE for f in fl)
        out.append(f"  {len(fl)} flip(s): {worse} success->failure, {len(fl) - worse} "
                   f"failure->success{borderline_count(section)}")
        out += [f"    {flip_line(f)}" for f in fl[:MAX_FLIP_LINES]]
        if len(fl) > MAX_FLIP_LINES:
            out.append(f"    ... and {len(fl) - MAX_FLIP_LINES} more (report.json, "
                       "duplexact compare --html)")
    out += [f"  {line}" for line in power_lines(section)]
    if (new := newly_measured_line(section)) is not None:
        out.append(f"  {new}")
    out += [f"  not compared: {s['target']}: {s['why']}" for s in other_not_compared(section)]
    out += [f"  warning: {w}" for w in section["warnings"]]
    return out


def borderline_count(section: dict) -> str:
    """``; 3 borderline (set aside by the gate)`` for the flips line, or nothing."""
    marked = sum(bool(f.get("borderline")) for f in section.get("flips") or [])
    if not marked:
        return ""
    return f"; {marked} borderline" + (" (set aside by the gate)"
                                       if section.get("ignore_borderline") else "")


def check_option(path: str | None, alpha) -> None:
    """Fail before the run starts when the baseline cannot be used."""
    if path:
        load(path)
    if not 0.0 < float(alpha) < 1.0:
        raise BaselineError(f"baseline alpha must be in (0, 1), got {alpha}")


def gate(report: Report, path: str, alpha: float = DEFAULT_ALPHA,
         ignore_borderline: bool = False) -> dict:
    """``compare`` against the report stored at ``path``; a baseline that cannot be read at
    the end of the run fails the gate and says why (never passes silently)."""
    try:
        return compare(report, load(path), alpha, str(path), ignore_borderline)
    except (BaselineError, KeyError, TypeError, ValueError, AttributeError) as e:
        # the file changed since the start, or a shape load does not know: the gate fails and
        # says why, and the run's own report is still written
        if not isinstance(e, BaselineError):
            e = BaselineError(f"baseline {path}: cannot be compared ({type(e).__name__}: {e})")
        return {"path": str(path), "alpha": alpha, "method": METHOD, "pairing": None,
                "comparisons": [], "not_compared": [], "not_measured_now": [], "flips": [],
                "drops": [], "warnings": [], "passed": False,
                "message": f"FAILED baseline: {e}"}
