"""``duplexact merge A.json B.json ... -o OUT.json``: shard reports -> one report.

The merged report is the report an unsharded run of the same selection writes: the instances
of every shard sorted by id, the summary recomputed by ``aggregate`` from those outcomes,
the settings of the shards with ``selection.shard`` cleared. It differs from that run's only in
``created`` (volatile) and in ``shards``, where each shard came from and where its recordings
are (so the HTML view finds the audio). ``usage`` (remote calls, cache hits) is the shards'
sum: equal to the unsharded run's where the calls are the same. The merged report is built by
``model.build``, the function the plugin builds its report with, so it has every section the
unsharded run's has (usage, judges, cost, the paper side by side).
Gates and baseline sections of the shards are dropped: they judged one shard. ``--gate`` and
``--baseline`` (the pytest options' forms, evaluated by the same builder) gate the merged
report, and the exit status says whether it passed: 0, 1 when a gate, the baseline or an
instance's error fails it (or when it is incomplete: gates pass a complete run only, as for
pytest), 2 when it cannot be merged. The ``robustness`` section (robustness.py) is built again over the merged run
and the run store (``--store``, default ``.duplexact``) as the unsharded run builds it, when a
shard has one or ``--store`` is given: each shard's own section compared one shard only.

Refused, with the file and field named: reports that are not DuplexAct reports, of different
report versions, models, datasets, scoring settings or selections; overlapping instances;
shards of different counts, repeated or missing shards; shards run at different timing
tolerances, or a scored trial over the shards' tolerance; instances of the selection (each
report's ``selected``) that no report has, unless ``--allow-incomplete`` (the merged report
then lists them in ``incomplete`` and says so in ``notes``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

from ...data.atomic import FILE_MODE
from ...data.results import (
    InstanceOutcome,
    finite_number,
    outcome_problem,
    over_tolerance,
    worst_lag_ms,
)
from ...run.journal import usage_problem
from ...run.rundir import write_json
from ...run.selection import SelectionError
from ...run.settings import RunSettings, SettingsError
from .. import ReportFileError, read_report, typed_report
from ..model import Report
from ..output import output_problem

PROVENANCE_KEYS = ("shards",)  # present in a merged report only


class MergeError(ReportFileError):
    pass


def load_report(path: str | Path) -> Report:
    """A shard's report, checked as the file it is (naming file and field), then parsed once:
    the merge reads the typed report."""
    d = read_report(path, ("model", "settings", "instances"), MergeError)
    if not isinstance(d["instances"], list):
        raise MergeError(f"{path}: field 'instances' is {_short(d['instances'])}, not a list of "
                         "instance outcomes")
    for k, item in enumerate(d["instances"]):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise MergeError(f"{path}: field 'instances[{k}]' is {_short(item)}, not an "
                             "instance outcome with an id")
    selected = d.get("selected")
    if selected is not None and not (isinstance(selected, list)
                                     and all(isinstance(i, str) for i in selected)):
        raise MergeError(f"{path}: field 'selected' is {_short(selected)}, not a list of "
                         "instance ids")
    if not isinstance(d["model"], str):
        raise MergeError(f"{path}: field 'model' is {_short(d['model'])}, not a string")
    if (problem := usage_problem(d.get("usage"))) is not None:
        raise MergeError(f"{path}: field {problem}")
    if d.get("estimate") is not None and (problem := _estimate_problem(d["estimate"])):
        raise MergeError(f"{path}: field {problem}")
    notes = d.get("notes")
    if notes is not None and not (isinstance(notes, list)
                                  and all(isinstance(n, str) for n in notes)):
        raise MergeError(f"{path}: field 'notes' is {_short(notes)}, not a list of strings")
    if not isinstance(d.get("extra", {}), dict):
        raise MergeError(f"{path}: field 'extra' is {_short(d['extra'])}, not an object")
    return typed_report(d, path, MergeError)


def _pair(x) -> bool:
    return isinstance(x, list) and len(x) == 2 and all(finite_number(v) for v in x)


def _estimate_problem(est) -> str | None:
    """Why a shard's ``estimate`` (spend/estimate.py ``plan``) cannot be summed, or None."""
    if not isinstance(est, dict):
        return f"'estimate' is {_short(est)}, not an object"
    checks = {"instances": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "stream_s": _pair, "output_window_s": finite_number,
              "workers": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "wall_s": lambda v: v is None or _pair(v), "cost": lambda v: isinstance(v, dict),
              "previous_run": lambda v: v is None or isinstance(v, str)}
    for key, ok in checks.items():
        if not ok(est.get(key)):
            return f"'estimate.{key}' is {_short(est.get(key))}"
    cost = est["cost"]
    if not _pair(cost.get("total")):
        return f"'estimate.cost.total' is {_short(cost.get('total'))}"
    if not isinstance(cost.get("complete"), bool):
        return f"'estimate.cost.complete' is {_short(cost.get('complete'))}"
    services = cost.get("services")
    if not isinstance(services, dict):
        return f"'estimate.cost.services' is {_short(services)}"
    for label, svc in services.items():
        if not (isinstance(svc, dict) and (svc.get("cost") is None or _pair(svc["cost"]))):
            return f"'estimate.cost.services.{label}' is {_short(svc)}"
    return None


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _settings(path: Path, report: Report) -> RunSettings:
    if not isinstance(report.settings, Mapping):
        raise MergeError(f"{path}: field 'settings' is {_short(report.settings)}, not an object")
    shard = (report.settings.get("selection") or {}).get("shard") \
        if isinstance(report.settings.get("selection"), Mapping) else None
    if isinstance(shard, str) and shard.strip().startswith("auto"):  # a run stores K/N
        raise MergeError(f"{path}: field 'settings.selection.shard' is {shard!r}, not K/N")
    try:
        settings = RunSettings.from_dict(report.settings)
        settings.selection.validate()
    except (SettingsError, SelectionError) as e:
        raise MergeError(f"{path}: {e}" if str(e).startswith("field ") else
                         f"{path}: field 'settings.selection': {e}") from None
    return settings


# Where a shard found the dataset is not what it ran: its fingerprint is (content).
_LOCAL_KEYS = ("dataset",)


def _comparable(settings: RunSettings) -> dict:
    out = {k: v for k, v in settings.unsharded().to_dict().items() if k not in _LOCAL_KEYS}
    if isinstance(out.get("served"), dict):  # the served model must agree; how each shard's
        out["served"] = {"model": out["served"].get("model")}  # server ran is its own
    return out


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(a) | set(b))
    out = []
    for k in keys:
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _differences(va, vb, f"{prefix}{k}.")
        elif va != vb:
            if f"{prefix}{k}" == "channel":  # a clean run has no channel key: say clean
                from ...pipelines.channel import CLEAN

                va, vb = va or CLEAN, vb or CLEAN
            out.append(f"settings.{prefix}{k}: {va!r} vs {vb!r}")
    return out


def _run_dir_of(path: Path, report: Report) -> str | None:
    """Where the shard's instance folders are: the report's own folder when it holds them."""
    folder = path.resolve().parent
    recs = [i.get("recording") for i in report.instances if i.get("recording")]
    if recs and any((folder / r).is_dir() for r in recs):
        return str(folder)
    return None


def merge(paths: list[str | Path], allow_incomplete: bool = False,
          store: str | Path | None = None, **gated) -> dict:
    """The merged report as report.json holds it (``merged``'s, written and read back)."""
    return json.loads(json.dumps(
        merged(paths, allow_incomplete, store, **gated).to_json()))  # tuples


def merged(paths: list[str | Path], allow_incomplete: bool = False,
           store: str | Path | None = None, *, gates=(), baseline=None) -> Report:
    """The merged report (see the module docstring); raises MergeError. Instances of the
    shards' selection that no report has (a shard run with ``-k``, an interrupted one, an
    edited report) refuse the merge, naming them; ``allow_incomplete`` merges anyway and
    marks the result (``incomplete``, a note). ``gates`` (parsed) and ``baseline``
    (builder.BaselineGate) are evaluated on the merged run, as the plugin does on a run."""
    if not paths:
        raise MergeError("nothing to merge: pass the shard reports")
    loaded = [(Path(p), load_report(p)) for p in paths]
    first_path, first = loaded[0]
    parsed = [_settings(p, rep) for p, rep in loaded]
    if first.model != parsed[0].model:
        raise MergeError(f"{first_path}: field 'model' disagrees with 'settings.model'")
    settings = parsed[0].unsharded()
    shards = [theirs.selection.shard for theirs in parsed]
    for (path, rep), theirs in zip(loaded, parsed):
        if rep.model != first.model:
            raise MergeError(f"{path}: model {rep.model!r} differs from {first_path}'s "
                             f"{first.model!r}; only shards of one run can be merged")
        diff = _differences(_comparable(settings), _comparable(theirs))
        if diff:
            raise MergeError(f"{path}: settings differ from {first_path}'s (model, dataset, "
                             "scoring and selection must agree; only the shard may differ): "
                             + "; ".join(diff))
    # the shards before their instances: shards of two counts (1/2 with 1/3) share instances,
    # and the count, not an "overlap", is what to fix
    _check_shards(shards, [p for p, _ in loaded])
    owner: dict[str, Path] = {}
    outcomes = []
    for path, rep in loaded:
        for d in rep.instances:  # outcome records, checked by load_report
            iid = d.get("id")
            if iid in owner:
                raise MergeError(f"{path}: instance {iid} is also in {owner[iid]}; shard "
                                 "reports must not overlap")
            owner[iid] = path
            problem = outcome_problem(d)
            if problem:
                raise MergeError(f"{path}: instance {iid}: malformed outcome ({problem})")
            try:
                outcomes.append(InstanceOutcome.from_dict(d))
            except (KeyError, TypeError, ValueError) as e:
                raise MergeError(f"{path}: instance {iid}: malformed outcome ({e})") from None
    tolerance = _timing_tolerance(loaded)
    for o in outcomes:  # judged against the merged run's tolerance, as a resume judges them
        if o.error is None and over_tolerance(o.clock, tolerance):
            raise MergeError(
                f"{owner[o.id]}: instance {o.id} was scored although its trial ran "
                f"{worst_lag_ms(o.clock):.0f} ms late, over the timing tolerance "
                f"({tolerance:g} ms); resume that shard (pytest --duplexact-resume=<its run "
                "dir>) to run it again, then merge")
    selected = {i for _, rep in loaded for i in rep.selected or ()} | set(owner)
    missing = _missing(loaded, set(owner))
    if missing and not allow_incomplete:
        raise MergeError(_missing_message(missing) + "; rerun them (pytest "
                         "--duplexact-resume=<that shard's run dir>), or pass "
                         "--allow-incomplete to merge without them")
    notes: list[str] = []
    for _, rep in loaded:
        notes += [n for n in rep.note_lines() if n not in notes]
    incomplete = None
    if missing:
        incomplete = [i for ids in missing.values() for i in ids]
        notes.append(_missing_message(missing) + " (merged with --allow-incomplete)")
    extra, dropped = _merged_extra([rep.extra for _, rep in loaded])
    if dropped:
        notes.append("extra (a pytest_duplexact_report hook's) key(s) " + ", ".join(dropped)
                     + " differ between the shards: not merged")
    usages = [rep.usage for _, rep in loaded if rep.usage is not None]
    estimates = [rep.estimate for _, rep in loaded if rep.estimate]
    from ...data.usage import total
    from ...spend.cost import load_prices
    from ...spend.estimate import combine
    from ..builder import Ran, Spent, build

    try:
        # the function the plugin builds its report with: usage (each shard's total; their
        # sum is the whole run's), judges (as each shard's run wrote them, over the whole
        # run), cost, the paper side by side, as an unsharded run has them
        report = build(
            Ran(outcomes, settings, first.model, selected),
            Spent(usage=total(usages) if usages else None,
                  prices=load_prices() if usages else None,
                  judges=any(rep.judges is not None for _, rep in loaded),
                  # shards run in parallel: their walls overlap
                  estimate=combine(estimates) if estimates and len(estimates) == len(loaded)
                  else None),
            gates=gates, baseline=baseline,
            notes=notes, incomplete=incomplete, timing_tolerance_ms=tolerance,
            shards=[{"report": str(p.resolve()), "shard": theirs.to_dict()["selection"]["shard"],
                     "instances": len(rep.instances), "run_dir": _run_dir_of(p, rep)}
                    for (p, rep), theirs in zip(loaded, parsed)])
    except ValueError as e:
        raise MergeError(f"cannot aggregate the merged instances: {e}") from None
    report = _with_robustness(report, loaded, store)
    return report.replace(extra=extra) if extra else report


def _with_robustness(report: Report, loaded: list[tuple[Path, Report]],
                     store: str | Path | None) -> Report:
    """The unsharded run's robustness section: built over the merged report and the run store
    when a shard has one (its run read the store) or ``store`` is given. A shard's own section
    cannot be carried: its row for this channel, and its paired tests, are one shard's."""
    from ..sections import robustness
    from .saved import DEFAULT_STORE

    if store is None and not any(rep.robustness for _, rep in loaded):
        return report
    where = Path(store if store is not None else DEFAULT_STORE)
    try:
        sec = robustness.section(report, robustness.stored_reports(where))
    except (OSError, ValueError) as e:
        sec, why = None, f"the run store {where} cannot be read ({e})"
    else:
        why = f"the run store {where} holds no run of this model and data under another channel"
    if sec is not None:
        return report.replace(robustness=sec)
    return report.replace(notes=[*report.note_lines(),
                                 f"no robustness section: {why}; pass --store DIR (the "
                                 "shards' --duplexact-storage folder)"])


def _timing_tolerance(loaded: list[tuple[Path, Report]]) -> float | None:
    """The one timing tolerance (ms; None: off) the shards with wall-clock trials ran at
    (their ``clock.tolerance_ms``); shards run at different ones are refused: a trial over
    one would be scored under the other."""
    found: dict = {}
    for path, rep in loaded:
        clock = rep.clock
        if clock is None:  # no wall-clock trial (a stepped model)
            continue
        if not isinstance(clock, Mapping):
            raise MergeError(f"{path}: field 'clock' is {_short(clock)}, not an object")
        tol = clock.get("tolerance_ms")
        if tol is not None and not (finite_number(tol) and tol > 0):
            raise MergeError(f"{path}: field 'clock.tolerance_ms' is {_short(tol)}, not a "
                             "number of milliseconds or null")
        found.setdefault(tol, path)
    if len(found) > 1:
        said = ", ".join(f"{p}: {'off' if t is None else f'{t:g} ms'}" for t, p in found.items())
        raise MergeError(f"the shards ran at different timing tolerances ({said}); a trial "
                         "over one would be scored under the other: resume the shards at one "
                         "--duplexact-timing-tolerance (late trials are run again), then merge")
    return next(iter(found), None)


def _merged_extra(extras: list[dict]) -> tuple[dict, list[str]]:
    """What a hook added to each shard's report (``extra``): a key every shard has with the
    same value is kept (the hook cannot run again over the merged run); the others are named,
    so the merged report says what it lacks instead of passing one shard's value off as the
    run's."""
    keys = list(dict.fromkeys(k for e in extras for k in e))
    kept = {k: extras[0][k] for k in keys
            if all(k in e and e[k] == extras[0][k] for e in extras)}
    return kept, [k for k in keys if k not in kept]


def _missing(loaded: list[tuple[Path, Report]], present: set[str]) -> dict[Path, list[str]]:
    """Per report, the ids its ``selected`` lists that no report has an outcome for."""
    out = {}
    for path, rep in loaded:
        gone = sorted(set(rep.selected or ()) - present)
        if gone:
            out[path] = gone
    return out


def _missing_message(missing: dict[Path, list[str]], shown: int = 10) -> str:
    n = sum(len(ids) for ids in missing.values())
    parts = []
    for path, ids in missing.items():
        more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
        parts.append(f"{path}: {', '.join(ids[:shown])}{more}")
    return (f"{n} selected instance(s) have no outcome in any report: " + "; ".join(parts))


def _check_shards(shards: list, paths: list[Path]) -> None:
    if all(s is None for s in shards):
        if len(shards) > 1:
            raise MergeError("none of these reports is a shard (settings.selection.shard is "
                             "null in each); merge the reports of one sharded run "
                             "(--duplexact-shard=K/N)")
        return
    for s, p in zip(shards, paths):
        if s is None:
            raise MergeError(f"{p}: not a shard (settings.selection.shard is null), but other "
                             "reports are")
    counts = {n for _, n in shards}
    if len(counts) > 1:
        raise MergeError("the reports come from different shard counts: "
                         + ", ".join(f"{p} is {k}/{n}" for (k, n), p in zip(shards, paths)))
    n = counts.pop()
    seen: dict[int, Path] = {}
    for (k, _), p in zip(shards, paths):
        if k in seen:
            raise MergeError(f"{p}: shard {k}/{n} is also {seen[k]}")
        seen[k] = p
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in seen]
    if missing:
        raise MergeError(f"missing shard(s) {', '.join(missing)}: the merged report would not "
                         "be the unsharded run's")


def expand(patterns: list[str]) -> list[str]:
    """Paths and globs (``shards/*/report.json``, ``**`` recursive), each pattern's matches
    sorted; a pattern that matches nothing is an error (a shard that never reported)."""
    import glob

    out: list[str] = []
    for pattern in patterns:
        if not glob.has_magic(pattern):
            out.append(pattern)
            continue
        hits = sorted(glob.glob(pattern, recursive=True))
        if not hits:
            raise MergeError(f"{pattern}: matches no file")
        out += [h for h in hits if h not in out]
    return out


def _output_problem(output: Path, reports: list[str]) -> str | None:
    """Why ``-o`` cannot take the merged report (report/output.py): a folder, one of the
    shard reports (never overwritten), a parent that is a file, no permission."""
    return output_problem(output, "-o", "report.json", inputs=reports)


def main(args) -> int:
    """``args.reports`` (paths or globs), ``args.output``, ``args.gate`` / ``args.baseline``;
    exit 0, 1 when the gates fail the merged run, or 2 with the reason on stderr."""
    output = Path(args.output)
    try:
        args.reports = expand(args.reports)
        problem = _output_problem(output, args.reports)
        if problem:
            raise MergeError(problem)
        gates, baseline = _gating(args)
        store = getattr(args, "store", None)
        if store is not None and not Path(store).is_dir():  # else: silently no robustness
            from ...data.suggest import not_a_folder

            raise MergeError(f"--store {store}: {not_a_folder(store)}; give the run store "
                             "the shards' runs were kept in (default .duplexact)")
        report = merged(args.reports,
                        allow_incomplete=getattr(args, "allow_incomplete", False),
                        store=getattr(args, "store", None), gates=gates, baseline=baseline)
        write_json(output, report.to_json(), FILE_MODE)  # the user's file: umask's mode
    except MergeError as e:
        print(f"duplexact merge: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"duplexact merge: cannot write -o {output}: {e.strerror or e}", file=sys.stderr)
        return 2
    tot = report.totals
    print(f"merged {len(args.reports)} report(s): {tot.instances} instance(s), "
          f"{tot.errors} error(s) -> {args.output}")
    if report.incomplete:
        print(f"duplexact merge: INCOMPLETE: {len(report.incomplete)} selected instance(s) "
              "missing (listed in the report's 'incomplete')", file=sys.stderr)
    if not (gates or baseline):
        return 0
    return _gate_status(report)


def _gating(args) -> tuple[tuple, object]:
    """The parsed ``--gate`` expressions and the ``--baseline`` to gate the merged run on,
    checked before anything is merged (a typo is one line, exit 2)."""
    from ..builder import BaselineGate
    from ..sections import gates as gates_mod
    from ..sections.baseline import DEFAULT_ALPHA, BaselineError, check_option

    try:
        gates = tuple(gates_mod.parse(g) for g in getattr(args, "gate", None) or ())
    except gates_mod.GateError as e:
        raise MergeError(f"--gate: {e}") from None
    path = getattr(args, "baseline", None)
    alpha = getattr(args, "baseline_alpha", None)
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    try:
        check_option(None, alpha)
    except BaselineError as e:
        raise MergeError(f"--baseline-alpha: {e}") from None
    if not path:
        return gates, None
    try:
        check_option(path, alpha)
    except BaselineError as e:
        raise MergeError(f"--baseline: {e}") from None
    return gates, BaselineGate(path, alpha, bool(getattr(args, "ignore_borderline",
                                                         False)))


def _gate_status(report: Report) -> int:
    """Print the merged run's gates and baseline as a run's terminal does; its exit status as
    a gated run's (builder.gated_exit)."""
    from ..builder import gated_exit
    from ..views.terminal import verdict_lines

    lines = verdict_lines(report, report.gate_list())
    if report.totals.errors:
        lines.append(f"{report.totals.errors} instance(s) ended in an error: the merged run "
                     "does not pass")
    status, said = gated_exit(report, len(report.incomplete or ()))
    if said:
        lines.append(f"duplexact merge: {said}")
    print("\n".join(line for line in lines if line))
    return status
