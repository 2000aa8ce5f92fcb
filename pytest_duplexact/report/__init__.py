"""The JSON report: the single source every other view (terminal, Markdown, HTML) and every
gate reads. Shape documented in docs/report-format.md; ``version`` bumps on any change."""

from __future__ import annotations

import sys
from pathlib import Path

from ..run.rundir import loads_bounded
from .model import SCHEMA, VERSION, Report
from .moved import install as _keep_moved_paths

_keep_moved_paths()  # ``import pytest_duplexact.report.views.html``: the old paths, one release

# differ between otherwise identical runs: the time, where a copy of the report sits relative
# to its run directory, and the invocation's plan and wall time (its estimate depends on -n,
# the concurrency, the shard and the store: session.finish)
VOLATILE_KEYS = ("created", "run_dir", "estimate", "measured")


class ReportFileError(ValueError):
    """A stored report that cannot be used; the message names the file and the field."""


def read_report(path, required=("model", "settings", "summary", "instances"),
                error=ReportFileError, label: str = "") -> dict:
    """A stored report.json, checked for what a tool reading it relies on. ``error`` is the
    exception class to raise (each tool has its own); ``label`` prefixes the file name."""
    p = Path(path)
    where = f"{label}{p}"
    try:
        d = loads_bounded(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except IsADirectoryError:
        raise error(f"{where}: is a directory, not a report.json") from None
    except (OSError, ValueError) as e:
        raise error(f"{where}: not a readable JSON report ({e})") from None
    if not isinstance(d, dict):
        raise error(f"{where}: not a JSON object")
    if d.get("schema") != SCHEMA:
        raise error(f"{where}: field 'schema' is {d.get('schema')!r} (expected {SCHEMA!r}); "
                    "is it a DuplexAct report.json?")
    if d.get("version") != VERSION:
        raise error(f"{where}: field 'version' is {d.get('version')!r}; this release reads "
                    f"version {VERSION} reports")
    for key in required:
        if key not in d:
            raise error(f"{where}: field {key!r} is missing")
    return d


def typed_report(d: dict, where, error=ReportFileError) -> Report:
    """A stored report past its file's checks (``read_report``'s and the tool's own), parsed
    once; a section of a shape no release wrote raises ``error`` naming ``where`` (the file)."""
    try:
        return Report.from_json(d)
    except (KeyError, TypeError, ValueError) as e:
        raise error(f"{where}: malformed report ({type(e).__name__}: {e})") from None


# what a report raises past read_report's checks when hand-edited into a shape no release wrote
MALFORMED = (KeyError, TypeError, AttributeError, ValueError)


def refuse(command: str, e: Exception, where: str = "") -> int:
    """What ``duplexact <command>`` says on stderr when a report cannot be used, and its exit
    status (2): a ReportFileError's own message, else (one of MALFORMED) a malformed report;
    ``where`` prefixes the latter (the file, when the command reads one)."""
    if isinstance(e, ReportFileError):
        print(f"duplexact {command}: {e}", file=sys.stderr)
    else:
        print(f"duplexact {command}: {where}malformed report ({type(e).__name__}: {e}); "
              "re-create it from its run directory (docs/report-format.md)", file=sys.stderr)
    return 2


def why_no_rate(c: dict) -> str:
    """What kept a group's instances out of its rates, each stage's own, e.g. '3 excluded,
    2 not judged (I), 1 errors' (an excluded trial or an error is the whole instance)."""
    parts = []
    for key, label in (("excluded", "excluded"), ("not_judged", "not judged"),
                       ("judge_errors", "judge errors"), ("errors", "errors"),
                       ("not_applicable", "n/a")):
        if not c.get(key):
            continue
        if f"{key}_S" not in c:  # excluded, errors, or a report older than the stage split
            parts.append(f"{c[key]} {label}")
            continue
        s_part = c[f"{key}_S"]
        parts += [f"{n} {label} ({stage})" for n, stage in ((c[key] - s_part, "I"),
                                                            (s_part, "S")) if n]
    return ", ".join(parts)


def timing_cell(t: dict | None) -> str:
    """Table 15's "median (IQR, n)" from a report's timing dict (aggregate.format_timing)."""
    from .aggregate import Timing, format_timing

    return format_timing(Timing.from_dict(t) if t else None)


def counts_of(report: Report, action: str, condition: str | None = None) -> dict | None:
    return report.summary.counts(action, condition)


def timing_of(report: Report, action: str, condition: str | None = None) -> dict | None:
    return report.summary.timing(action, condition)


def lookup(report: Report):
    """The gates' view of a report: (value or None, why it is missing)."""

    def get(action: str, condition: str | None, metric: str):
        where = action if condition is None else f"{action}.{condition}"
        if metric == "T":
            t = timing_of(report, action, condition)
            if not t or not t.get("n"):
                return None, f"no timing observations for {where}"
            return t["median"], ""
        if metric in ("p10", "p50", "p90", "no_response"):
            lat = report.summary.latency(action, condition)
            if metric == "no_response":
                if not lat or not lat.get("trials"):
                    return None, f"no scored {where} trials with a timeline"
                return lat["no_response"], ""
            if not lat or not lat.get("n"):
                return None, f"no latency observations for {where}"
            return lat[metric], ""
        c = counts_of(report, action, condition)
        if c is None or not c["n"]:
            return None, f"no {where} instances were run"
        if metric == "I":
            if not c["n_I"]:
                return None, (f"no valid {where} trials: {c['excluded']} excluded, "
                              f"{c['not_judged']} not judged, {c['errors']} errors, "
                              f"{c['judge_errors']} judge errors")
            return c["I"], ""
        if not c["n_S"]:
            return None, (f"no {where} instance entered subsequent evaluation "
                          f"({c['not_judged']} not judged, {c['judge_errors']} judge errors, "
                          f"{c['not_applicable']} not applicable; is --duplexact-judge set?)")
        return c["S"], ""

    return get


def __getattr__(name: str):
    """``from pytest_duplexact.report import html``: a module that moved (moved.py)."""
    from .moved import MOVED, moved

    if name in MOVED:
        return moved(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
