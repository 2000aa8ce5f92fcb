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

RUN_FILE = "run.json"
REPORT_FILE = "report.json"
# Settings whose change makes stored outcomes wrong (they are re-run, never mixed).
SCORING_KEYS = ("judge", "judge_base_url", "audio_judge", "transcriber", "simulator",
                "simulator_model", "scoring_version")
# Settings whose change makes a run a different run altogether (resume refuses).
IDENTITY_KEYS = ("model", "model_options", "dataset_fingerprint")


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


def _model_options(config) -> dict:
    out = {}
    for item in options.get(config, "model-option"):
        if "=" not in item:
            raise pytest.UsageError(f"--duplexact-model-option expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def settings_of(config, spec: str, root: Path) -> dict:
    return {
        "model": spec,
        "model_options": _model_options(config),
        "dataset": str(root),
        "dataset_fingerprint": dataset_fingerprint(root),
        "judge": options.get(config, "judge"),
        "judge_base_url": options.get(config, "judge-base-url"),
        "audio_judge": options.get(config, "audio-judge"),
        "transcriber": options.get(config, "transcriber"),
        "simulator": options.get(config, "simulator"),
        "simulator_model": options.get(config, "simulator-model")
        if options.get(config, "simulator") == "llm" else None,
        "scoring_version": __version__,
    }


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


def _seed(settings: dict):
    return (settings.get("selection") or {}).get("seed")


def _load_resumed(run_dir: Path, settings: dict, wanted_ids: set[str]) -> tuple[dict, list]:
    """Finished outcomes reusable under ``settings`` (journal.py decides, instance by
    instance, from each outcome's fingerprint and files) and the messages for the terminal.
    Harness and judge errors are retried; outcomes scored under other settings are re-run,
    never mixed in."""
    run_file = run_dir / RUN_FILE
    if not run_file.is_file():
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: no {RUN_FILE} there; is it a "
                                "DuplexAct run directory?")
    try:
        old = json.loads(run_file.read_text(encoding="utf-8"))["settings"]
        if not isinstance(old, dict):
            raise TypeError("'settings' is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: {RUN_FILE} is damaged "
                                f"({type(e).__name__}: {e}); start a new run directory") from None
    diff = [k for k in IDENTITY_KEYS if old.get(k) != settings.get(k)]
    if diff:
        details = "; ".join(f"{k}: {old.get(k)!r} -> {settings.get(k)!r}" for k in diff)
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: this is a different run "
                                f"({details}); start a new run directory instead")
    found = journal.scan(run_dir, wanted_ids, journal.fingerprint(settings))
    messages = [f"duplexact: resuming {run_dir}: {found.summary()}"]
    changed = [f"{k}: {old.get(k)!r} -> {settings.get(k)!r}" for k in SCORING_KEYS
               if old.get(k) != settings.get(k)]
    if _seed(old) != _seed(settings):
        changed.append(f"seed: {_seed(old)!r} -> {_seed(settings)!r}")
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
    _audio_format(config)  # a bad value is refused before anything runs
    settings = settings_of(config, spec, root)
    settings["selection"] = {"actions": list(sel.actions), "conditions": list(sel.conditions),
                             "scenarios": list(sel.scenarios), "sources": list(sel.sources),
                             "limit": sel.limit, "seed": sel.seed,
                             "shard": None if sel.shard is None else "%d/%d" % sel.shard}
    run_dir = _resolve_run_dir(config, spec)
    state = State(spec, settings, instances, run_dir, gate_list)
    worker = hasattr(config, "workerinput")
    if options.get(config, "resume"):
        wanted = {i.id for i in instances}
        if worker:  # the controller checked run.json (and rewrote it): the journal decides
            state.resumed = journal.scan(run_dir, wanted, journal.fingerprint(settings)).finished
        else:
            state.resumed, state.messages = _load_resumed(run_dir, settings, wanted)
    if not worker:
        _preflight(config, spec, settings)
        _check_baseline(config)
        write_json_atomic(run_dir / RUN_FILE, {"settings": settings, "package_version":
                                               __version__,
                                               "fingerprint": journal.fingerprint(settings)})
        # An earlier session's report no longer describes the folder once instances re-run;
        # this session writes its own at the end (also on Ctrl-C, not on SIGKILL).
        (run_dir / REPORT_FILE).unlink(missing_ok=True)
    return state


def _preflight(config, spec: str, settings: dict) -> None:
    """Fail before any instance runs when the model cannot work at all (unknown name, missing
    API key): models may expose ``preflight(**options)`` on their factory."""
    from .models import preflight

    try:
        preflight(spec, **settings["model_options"])
    except Exception as e:  # the model's own, user-facing message
        raise pytest.UsageError(f"--duplexact-model={spec}: {e}") from None


def _check_baseline(config) -> None:
    from .report.baseline import BaselineError, check_option

    try:
        check_option(options.get(config, "baseline"), options.get(config, "baseline-alpha"))
    except BaselineError as e:
        raise pytest.UsageError(f"--duplexact-baseline: {e}") from None


def build_harness(config, state) -> Harness:
    from .models import resolve_model
    from .judges.cache import RequestCache
    from .wiring import make_panel, make_policy, make_transcriber

    from .models import is_streaming

    model = resolve_model(state.model_spec, **state.settings["model_options"])
    cache_dir = Path(options.get(config, "cache-dir") or state.run_dir / "cache")
    harness = Harness(
        model=model, model_name=state.model_spec, run_dir=state.run_dir,
        panel=make_panel(state.settings, cache_dir),
        transcriber=make_transcriber(state.settings, cache_dir),
        policy=make_policy(state.settings, cache_dir),
        seed=state.settings["selection"]["seed"],
        model_options=state.settings["model_options"],
        fingerprint=journal.fingerprint(state.settings),
        vad_cache=RequestCache(cache_dir),  # re-scoring the same audio skips the VAD
        audio_format=_audio_format(config),
    )
    concurrency = options.get(config, "concurrency")
    if concurrency < 1:
        raise pytest.UsageError("--duplexact-concurrency must be >= 1")
    if concurrency > 1 and is_streaming(model):  # a stepped model computes one trial at a time
        from .prefetch import Prefetcher

        harness.prefetcher = Prefetcher(harness.record_async, concurrency)
    return harness


def _audio_format(config) -> str:
    from .recording_io import AUDIO_FORMATS

    fmt = str(options.get(config, "audio-format") or "flac").strip().lower()
    if fmt not in AUDIO_FORMATS:
        raise pytest.UsageError(f"--duplexact-audio-format={fmt!r}: use flac or wav")
    return fmt


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
