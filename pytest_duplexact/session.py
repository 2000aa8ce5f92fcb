"""Run-level setup and teardown behind plugin.py: options -> dataset, selection, run
directory, fingerprint, resume; at the end, the report, the gates and the exit status."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from . import __version__, gates, options, usage
from . import journal
from .harness import Harness, write_json_atomic
from .instance import DatasetError, bundled_root, check_dataset
from .results import InstanceOutcome
from .selection import Selection, SelectionError, parse_shard, select
from .settings import RunSettings, SettingsError

RUN_FILE = "run.json"
REPORT_FILE = "report.json"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "model"


def dataset_fingerprint(root: Path) -> str:
    """sha256 of the manifest and header: which instances, annotations and audio files."""
    h = hashlib.sha256()
    for name in ("dataset.json", "instances.jsonl"):
        p = root / name
        h.update(name.encode())
        h.update(p.read_bytes() if p.is_file() else b"")
    return h.hexdigest()


def _model_options(config) -> tuple[tuple[str, str], ...]:
    out = {}
    for item in options.get(config, "model-option"):
        if "=" not in item:
            raise pytest.UsageError(f"--duplexact-model-option expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()  # a repeated key: the last value wins
    return tuple(out.items())


def settings_of(config, spec: str, root: Path, selection: Selection) -> RunSettings:
    """The run's settings, read once from the options."""
    simulator = options.get(config, "simulator")
    return RunSettings(
        model=spec,
        model_options=_model_options(config),
        dataset=str(root),
        dataset_fingerprint=dataset_fingerprint(root),
        judge=options.get(config, "judge"),
        judge_base_url=options.get(config, "judge-base-url"),
        audio_judge=options.get(config, "audio-judge"),
        transcriber=options.get(config, "transcriber"),
        simulator=simulator,
        simulator_model=options.get(config, "simulator-model") if simulator == "llm" else None,
        scoring_version=__version__,
        selection=selection,
    )


def _resolve_run_dir(config, spec: str) -> Path:
    if hasattr(config, "workerinput") and "duplexact_run_dir" in config.workerinput:
        return Path(config.workerinput["duplexact_run_dir"])
    resume = options.get(config, "resume")
    if resume:
        return Path(resume).resolve()
    given = options.get(config, "run-dir")
    if given:
        return Path(given).resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (Path(config.invocation_params.dir) / "duplexact-runs" /
            f"{_slug(spec)}-{stamp}").resolve()


def _load_resumed(run_dir: Path, settings: RunSettings,
                  wanted_ids: set[str]) -> tuple[dict, list]:
    """Finished outcomes reusable under ``settings`` (journal.py decides, instance by
    instance, from each outcome's fingerprint and files) and the messages for the terminal.
    Harness and judge errors are retried; outcomes scored under other settings are re-run,
    never mixed in."""
    run_file = run_dir / RUN_FILE
    if not run_file.is_file():
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: no {RUN_FILE} there; is it a "
                                "DuplexAct run directory?")
    try:
        old = RunSettings.from_dict(json.loads(run_file.read_text(encoding="utf-8"))["settings"])
    except (ValueError, KeyError, TypeError) as e:  # SettingsError is a ValueError
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: {RUN_FILE} is damaged "
                                f"({type(e).__name__}: {e}); start a new run directory") from None
    diff = settings.identity_changes(old)
    if diff:
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: this is a different run "
                                f"({'; '.join(diff)}); start a new run directory instead")
    found = journal.scan(run_dir, wanted_ids, settings.fingerprint())
    messages = [f"duplexact: resuming {run_dir}: {found.summary()}"]
    changed = settings.scoring_changes(old)
    stale = found.count(journal.Status.STALE)
    if changed or stale:
        why = f"settings changed ({'; '.join(changed)})" if changed else \
            "some outcomes were stored under other settings"
        messages.append(f"duplexact: WARNING: {why}: {stale} stored outcome(s) scored under "
                        "the old settings are invalidated and re-run, never mixed with new ones")
    return found.finished, messages


def build_state(config, spec: str):
    from .plugin import State

    root = Path(options.get(config, "data") or bundled_root()).resolve()
    dataset, problems = check_dataset(root)
    if problems:
        raise pytest.UsageError(f"--duplexact-data={root}: refusing to start.\n"
                                + str(DatasetError(problems)))
    try:
        sel = Selection(
            actions=tuple(options.get(config, "action")),
            conditions=tuple(options.get(config, "condition")),
            scenarios=tuple(options.get(config, "scenario")),
            sources=tuple(options.get(config, "source")),
            limit=options.get(config, "limit"),
            seed=options.get(config, "seed"),
            shard=parse_shard(options.get(config, "shard")),
        )
        instances = select(dataset.instances, sel)
    except SelectionError as e:
        raise pytest.UsageError(f"duplexact selection: {e}") from None
    try:
        gate_list = [gates.parse(g) for g in options.get(config, "gate")]
    except gates.GateError as e:
        raise pytest.UsageError(str(e)) from None
    settings = settings_of(config, spec, root, sel)
    run_dir = _resolve_run_dir(config, spec)
    state = State(spec, settings, instances, run_dir, gate_list)
    worker = hasattr(config, "workerinput")
    if options.get(config, "resume"):
        wanted = {i.id for i in instances}
        if worker:  # the controller checked run.json (and rewrote it): the journal decides
            state.resumed = journal.scan(run_dir, wanted, settings.fingerprint()).finished
        else:
            state.resumed, state.messages = _load_resumed(run_dir, settings, wanted)
    if not worker:
        _preflight(config, spec, settings)
        _check_baseline(config)
        write_json_atomic(run_dir / RUN_FILE, {"settings": settings.to_dict(),
                                               "package_version": __version__,
                                               "fingerprint": settings.fingerprint()})
        # An earlier session's report no longer describes the folder once instances re-run;
        # this session writes its own at the end (also on Ctrl-C, not on SIGKILL).
        (run_dir / REPORT_FILE).unlink(missing_ok=True)
    return state


def _preflight(config, spec: str, settings: RunSettings) -> None:
    """Fail before any instance runs when the model cannot work at all (unknown name, missing
    API key): models may expose ``preflight(**options)`` on their factory."""
    from .models import preflight

    try:
        preflight(spec, **settings.options)
    except Exception as e:  # the model's own, user-facing message
        raise pytest.UsageError(f"--duplexact-model={spec}: {e}") from None


def _check_baseline(config) -> None:
    from .report.baseline import BaselineError, check_option

    try:
        check_option(options.get(config, "baseline"), options.get(config, "baseline-alpha"))
    except BaselineError as e:
        raise pytest.UsageError(f"--duplexact-baseline: {e}") from None


def build_harness(config, state) -> Harness:
    concurrency = options.get(config, "concurrency")
    if concurrency < 1:
        raise pytest.UsageError("--duplexact-concurrency must be >= 1")
    cache_dir = options.get(config, "cache-dir")
    try:
        return Harness.from_settings(state.settings, state.run_dir,
                                     cache_dir=Path(cache_dir) if cache_dir else None,
                                     concurrency=concurrency)
    except SettingsError as e:
        raise pytest.UsageError(str(e)) from None


def finish(config, state, exitstatus: int) -> int | None:
    """Controller side: build and write the report, evaluate gates; returns the new exit
    status when gates decide it."""
    from .report import build_report, lookup

    outcomes = [InstanceOutcome.from_dict(d) for d in state.outcomes.values()]
    report = build_report(outcomes, state.settings, state.model_spec)
    results = [gates.evaluate(g, lookup(report)) for g in state.gates]
    report["gates"] = [r.to_dict() for r in results]
    report["notes"] = list(state.notes)
    report["usage"] = usage.total(state.usage.values())
    missing = len({i.id for i in state.instances} - {o.id for o in outcomes})
    if missing:  # the report is incomplete: say so in it, and how to finish it
        report["notes"].append(
            f"{missing} of {len(state.instances)} selected instance(s) have no outcome "
            "(deselected, interrupted, or lost with a crashed worker); "
            f"pytest --duplexact-resume={state.run_dir} runs them")
    baseline = options.get(config, "baseline")
    if baseline:  # regression gate (report/baseline.py): significant drops fail the run
        from .report.baseline import gate

        report["baseline"] = gate(report, baseline, options.get(config, "baseline-alpha"))
    state.report, state.gate_results = report, results
    write_json_atomic(state.run_dir / REPORT_FILE, report)
    extra = options.get(config, "report")
    if extra:
        write_json_atomic(Path(extra), report)
    if not (state.gates or baseline) or exitstatus not in (0, 1):
        return None  # no gates: pytest's own semantics; interrupted / usage errors stay
    errors = report["totals"]["errors"]
    passed = all(r.passed for r in results) and (not baseline or report["baseline"]["passed"])
    return 0 if passed and errors == 0 else 1
