"""``duplexact rescore RUN --transcriber=NAME``: the same recordings, heard by another
transcriber, compared instance by instance with the original.

A new run in its own folder (``--out``, default ``RUN-<name>`` beside RUN): pytest with
``--duplexact-model=recorded:RUN`` and ``native_transcript=false`` (so the transcriber hears
every recording, a model's own words included), the original's data, selection, judges and
simulator (resume's mapping: pytest_plugin/resumed.py), and the transcriber asked for. No model
is called; judge answers come from RUN's cache where the question is unchanged. Then
``duplexact compare RUN/report.json NEW/report.json``: the flip table and McNemar's test.
``--transcriber=whisper-1`` checks a run against the paper's transcriber.

Exit status: the comparison's (0: no significant drop, 1: a significant drop, 2: a report
cannot be read); 4, with one line, for a mistake in what was asked (RUN not a finished run
folder, an unknown or missing transcriber, whisper-1 without its key, an --out that holds
files, an --html that cannot be written: all checked before the re-scoring run); the
re-scoring run's own status when it ended otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
from argparse import Namespace
from dataclasses import replace
from pathlib import Path

USAGE_ERROR = 4


class RescoreError(Exception):
    """A mistake in what was asked; the message says what to do."""


def add_parser(sub) -> None:
    p = sub.add_parser("rescore", help="re-score a run's recordings with another transcriber "
                                       "and compare, instance by instance (no model call)")
    p.add_argument("run", metavar="RUN", help="a finished run directory (run.json, "
                                              "report.json, instances/)")
    p.add_argument("--transcriber", required=True, metavar="NAME",
                   help="tiny.en, base, whisper-1, openai:MODEL, package.module:factory "
                        "(docs/timeline.md)")
    p.add_argument("--out", metavar="DIR", help="the new run directory (default: RUN-NAME "
                                                "beside RUN)")
    p.add_argument("-n", "--workers", type=int, default=0, metavar="N",
                   help="pytest-xdist workers for the re-scoring run (default: none)")
    p.add_argument("--html", metavar="PATH", help="write the comparison page")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level (Holm) of a drop")


def _settings(run: Path):
    from ..run.rundir import RUN_FILE, RunDir
    from ..run.settings import RunSettings

    if not run.is_dir():
        from ..data.suggest import not_a_folder

        raise RescoreError(f"{run}: {not_a_folder(run)}; give a run directory (the folder a "
                           "run printed as 'run directory')")
    rd = RunDir(run)
    if not rd.run_file.is_file():
        raise RescoreError(f"{run}: not a DuplexAct run directory (no {RUN_FILE}); give the "
                           "folder a run printed as 'run directory'")
    if not rd.report_file.is_file() or not rd.instances.is_dir():
        raise RescoreError(f"{run}: the run has no report.json or no recordings; finish it "
                           f"first: pytest --duplexact-resume={run}")
    try:
        return RunSettings.from_dict(rd.read_run_settings()), rd
    except (ValueError, KeyError, TypeError) as e:
        raise RescoreError(f"{run}: {RUN_FILE} cannot be read ({e})") from None


def _check_transcriber(settings) -> None:
    """The run's own preflight checks of the transcriber, its key and its URL."""
    import pytest

    from ..pytest_plugin import preflight

    if settings.transcriber in ("auto", "native"):
        raise RescoreError(f"--transcriber={settings.transcriber}: name the transcriber that "
                           "should hear the recordings (tiny.en, base, whisper-1, ...)")
    try:
        preflight.check_transcriber(settings)
        preflight.check_keys(settings)
        preflight.check_urls(settings)
    except pytest.UsageError as e:
        raise RescoreError(str(e).replace("--duplexact-transcriber=", "--transcriber=", 1)) \
            from None


def _out_dir(run: Path, name: str, given: str | None) -> Path:
    if given:
        from ..data.suggest import new_folder_problem

        problem = new_folder_problem(given, "--out")  # a file, a full folder, a bad parent
        if problem:
            raise RescoreError(problem)
        return Path(given)
    stem = f"{run.resolve().name}-{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}"
    out, k = run.resolve().parent / stem, 2
    while out.exists():
        out, k = run.resolve().parent / f"{stem}-{k}", k + 1
    return out


def _check_html(html: str | None, rd) -> None:
    """``--html`` can take the comparison page: said now, not after the re-scoring run."""
    from ..report.output import OutputError, check_output

    if html:
        try:
            check_output(html, "--html", "compare.html", [rd.report_file])
        except OutputError as e:
            raise RescoreError(str(e)) from None


def pytest_args(run: Path, settings, rd, out: Path, workers: int = 0) -> list[str]:
    """The re-scoring run's options: the original's (resume's mapping) with the model, its
    options, the transcriber, the run folder and the cache replaced."""
    from ..models import RECORDED_PREFIX
    from ..pytest_plugin.resumed import stored_values

    values = stored_values(settings)
    values.pop("model-option", None)
    values.update({"model": f"{RECORDED_PREFIX}{run.resolve()}",
                   "transcriber": settings.transcriber, "run-dir": str(out)})
    if rd.cache_dir.is_dir():
        values["cache-dir"] = str(rd.cache_dir.resolve())
    args = [f"--duplexact-{k}=" + (",".join(v) if isinstance(v, list) else str(v))
            for k, v in values.items()]
    args.append("--duplexact-model-option=native_transcript=false")
    if workers:
        args.append(f"-n{workers}")
    # --tb=no: a miss's explanation (its timeline lanes) for every instance would bury the
    # comparison; the errors are said after the run, from its report (_errors_said)
    return ["-p", "no:cacheprovider", "-q", "--tb=no", *args]


def _errors_said(report_file: Path, shown: int = 10) -> list[str]:
    """The re-scoring run's errors, each instance with its reason (its short summary line is
    cut to the terminal's width), at most ``shown`` of them."""
    import json

    try:
        instances = json.loads(report_file.read_text(encoding="utf-8")).get("instances") or []
    except (OSError, ValueError, AttributeError):
        return []
    errors = [(d.get("id"), " ".join(str(d["error"]).split())) for d in instances
              if isinstance(d, dict) and d.get("error")]
    if not errors:
        return []
    out = [f"duplexact rescore: {len(errors)} instance(s) ended in an error:"]
    out += [f"  {iid}: {why[:300]}" for iid, why in errors[:shown]]
    if len(errors) > shown:
        out.append(f"  ... and {len(errors) - shown} more (report.json, 'instances')")
    return out


def main(args) -> int:
    run = Path(args.run)
    try:
        stored, rd = _settings(run)
        settings = replace(stored, transcriber=args.transcriber.strip())
        _check_transcriber(settings)
        out = _out_dir(run, settings.transcriber, getattr(args, "out", None))
        _check_html(getattr(args, "html", None), rd)
    except RescoreError as e:
        print(f"duplexact rescore: {e}", file=sys.stderr)
        return USAGE_ERROR
    cmd = [sys.executable, "-m", "pytest",
           *pytest_args(run, settings, rd, out, getattr(args, "workers", 0) or 0)]
    print(f"duplexact rescore: {run} heard by {settings.transcriber} (was "
          f"{stored.transcriber or 'auto'}), no model call; new run: {out}", flush=True)
    rc = subprocess.call(cmd)
    new_report = out / rd.report_file.name
    written = new_report.is_file()
    for line in _errors_said(new_report) if written else ():  # a stopped run's too
        print(line, flush=True)
    if rc not in (0, 1) or not written:
        if rc != USAGE_ERROR:  # a refused run has said why in one line
            print(f"duplexact rescore: the re-scoring run ended with pytest exit status {rc}"
                  f"{'' if written else ' and no report'}; see above", file=sys.stderr)
        return rc or 1
    print("", flush=True)
    from ..report.views.compare import main as compare

    return compare(Namespace(a=str(rd.report_file), b=str(new_report),
                             html=getattr(args, "html", None), alpha=args.alpha,
                             audio="embed", embed_limit=None))
