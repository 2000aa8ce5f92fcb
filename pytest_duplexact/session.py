"""Run-level setup and teardown behind plugin.py: options -> dataset, selection, run
directory, fingerprint, resume; at the end, the report, the gates and the exit status."""

from __future__ import annotations

import hashlib
import json
import os
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
                "simulator_model", "scoring_version", "bargein_branches")
# Settings whose change makes a run a different run altogether (resume refuses).
IDENTITY_KEYS = ("model", "model_options", "dataset_fingerprint")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "model"


def dataset_fingerprint(root: Path) -> str:
    """sha256 of the manifest, the header and the bytes of every clip the manifest names
    (sorted by relative path): which instances, annotations and audio. Content, not mtimes, so shards cloned on different machines agree; a re-encoded or
    replaced clip makes stored outcomes stale (resume re-runs them). Cost: one read of the
    audio per run (the bundled 6.6 MB in about 60 ms, 140 files)."""
    h = hashlib.sha256()
    for name in ("dataset.json", "instances.jsonl"):
        p = root / name
        h.update(name.encode())
        h.update(p.read_bytes() if p.is_file() else b"")
    real = root.resolve()
    for p in _audio_files(root):
        h.update(b"\0" + p.relative_to(real).as_posix().encode("utf-8", "surrogateescape")
                 + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _audio_files(root: Path) -> list[Path]:
    """The clip files the manifest names (validation reports the ones that are missing or
    malformed; they are skipped here)."""
    names: set[str] = set()
    manifest = root / "instances.jsonl"
    text = manifest.read_text("utf-8", errors="replace") if manifest.is_file() else ""
    for line in text.split("\n"):
        try:
            clips = json.loads(line).get("audio") or {}
        except (ValueError, AttributeError, RecursionError):
            continue
        for clip in clips.values() if isinstance(clips, dict) else ():
            path = clip.get("path") if isinstance(clip, dict) else clip
            if isinstance(path, str):
                names.add(path)
    out = []
    for name in sorted(names):
        try:
            p = (root / name).resolve()
            if p.is_file() and p.is_relative_to(root.resolve()):
                out.append(p)
        except (OSError, ValueError):
            continue
    return out


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


def _resolve_run_dir(config, spec: str, shard: tuple[int, int] | None = None) -> Path:
    if hasattr(config, "workerinput") and "duplexact_run_dir" in config.workerinput:
        return Path(config.workerinput["duplexact_run_dir"])
    resume = options.get(config, "resume")
    given = options.get(config, "run-dir")
    if resume:
        if given and Path(given).resolve() != Path(resume).resolve():
            raise pytest.UsageError(
                f"--duplexact-resume={resume} and --duplexact-run-dir={given}: a resumed run "
                "continues in its own folder; drop --duplexact-run-dir")
        return Path(resume).resolve()
    if given:
        run_dir = Path(given).resolve()
        if _holds_files(run_dir):
            raise pytest.UsageError(
                f"--duplexact-run-dir={given}: {run_dir} is not empty{_what_run(run_dir)}; "
                f"continue that run with --duplexact-resume={given}, or choose a new folder")
        return run_dir
    stamp = time.strftime("%Y%m%d-%H%M%S")
    part = "" if shard is None else "-shard%dof%d" % shard  # shards of one run never collide
    base = Path(config.invocation_params.dir) / "duplexact-runs" / f"{_slug(spec)}-{stamp}{part}"
    run_dir, k = base, 1
    while _holds_files(run_dir):  # two runs started in the same second
        k += 1
        run_dir = base.with_name(f"{base.name}-{k}")
    return run_dir.resolve()


def _holds_files(folder: Path) -> bool:
    from .runlock import LOCK_FILE

    try:
        return any(p.name != LOCK_FILE for p in folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return folder.exists()


def _what_run(run_dir: Path) -> str:
    try:
        settings = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))["settings"]
        return f" (it holds a run of model {settings['model']!r})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


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

    data = options.get(config, "data")
    released = None
    if data and str(data).startswith("hf:"):  # the released benchmark (released/)
        from .released.run import resolve_for_run

        root, released = resolve_for_run(config, data)
    else:
        root = Path(data or bundled_root()).resolve()
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
            corpora=tuple(options.get(config, "corpus")),
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
    settings = settings_of(config, spec, root)
    settings["selection"] = {"actions": list(sel.actions), "conditions": list(sel.conditions),
                             "scenarios": list(sel.scenarios), "sources": list(sel.sources),
                             "limit": sel.limit, "seed": sel.seed,
                             "shard": None if sel.shard is None else "%d/%d" % sel.shard}
    if sel.corpora:  # only when used, so reports of other runs keep their bytes
        settings["selection"]["corpora"] = list(sel.corpora)
    if released is not None:
        settings["released"] = released
    branches = options.get(config, "bargein-branches")
    if branches not in ("on", "off"):
        raise pytest.UsageError("--duplexact-bargein-branches: use 'on' or 'off'")
    if any(r in i.clips for i in dataset.instances for r in ("branch_acknowledged",
                                                              "branch_ignored")):
        settings["bargein_branches"] = branches  # it changes what such instances hear
    run_dir = _resolve_run_dir(config, spec, sel.shard)
    state = State(spec, settings, instances, run_dir, gate_list)
    if released is not None and released["unmappable"]:
        state.notes.append(f"{released['unmappable']} row(s) of the released data skipped as "
                           "unmappable (--duplexact-skip-unmappable): "
                           + ", ".join(released["unmappable_ids"]))
    worker = hasattr(config, "workerinput")
    if options.get(config, "resume"):
        wanted = {i.id for i in instances}
        if worker:  # the controller checked run.json (and rewrote it): the journal decides
            state.resumed = journal.scan(run_dir, wanted, journal.fingerprint(settings)).finished
        else:
            state.resumed, state.messages = _load_resumed(run_dir, settings, wanted)
    if not worker:
        _check_urls(settings)
        _preflight(config, spec, settings)
        _preflight_data(spec, instances)
        state.baseline = _check_baseline(config)
        _check_prices(config)
        from .runlock import RunDirLocked, RunLock

        try:
            state.lock = RunLock.acquire(run_dir)
        except (RunDirLocked, OSError) as e:
            raise pytest.UsageError(str(e)) from None
        try:
            write_json_atomic(run_dir / RUN_FILE, {"settings": settings, "package_version":
                                                   __version__,
                                                   "fingerprint": journal.fingerprint(settings)})
        except OSError as e:
            state.lock.release()
            raise pytest.UsageError(f"cannot write the run directory {run_dir}: {e}") from None
        # A resumed folder keeps its earlier report until this session's replaces it (on
        # Ctrl-C too, not on SIGKILL): never a moment with no report at all.
    return state


def _check_urls(settings: dict) -> None:
    """Judge / transcriber / simulator base URLs that would carry the key in clear."""
    import os

    from .netsafety import insecure_url_problem

    if not (settings.get("judge") or settings.get("audio_judge")
            or settings.get("transcriber") not in (None, "auto", "native", "offline")
            or settings.get("simulator") == "llm"):
        return  # nothing remote is asked for
    for what, url in (("--duplexact-judge-base-url", settings.get("judge_base_url")),
                      *((name, os.environ.get(name)) for name in (
                          "DUPLEXACT_JUDGE_BASE_URL", "DUPLEXACT_AUDIO_JUDGE_BASE_URL",
                          "DUPLEXACT_SIMULATOR_BASE_URL", "DUPLEXACT_TRANSCRIBE_BASE_URL",
                          "OPENAI_BASE_URL"))):
        problem = insecure_url_problem(url, what)
        if problem:
            raise pytest.UsageError(problem)


def _preflight(config, spec: str, settings: dict) -> None:
    """Fail before any instance runs when the model cannot work at all (unknown name, missing
    API key): models may expose ``preflight(**options)`` on their factory."""
    from .models import preflight

    try:
        preflight(spec, **settings["model_options"])
    except Exception as e:  # the model's own, user-facing message
        raise pytest.UsageError(f"--duplexact-model={spec}: {e}") from None


def _preflight_data(spec: str, instances) -> None:
    """The built-in oracle speaks the model-side clips; without them it cannot run at all."""
    if spec == "oracle":
        from .models.oracle import missing_clips

        why = missing_clips(instances)
        if why:
            raise pytest.UsageError(f"--duplexact-model=oracle: {why}")


def _check_prices(config) -> None:
    from .report.cost import PriceError, load_prices

    try:
        load_prices(options.get(config, "prices"))
    except PriceError as e:
        raise pytest.UsageError(f"--duplexact-prices: {e}") from None


def _store(config) -> Path:
    from .report.store import DEFAULT_STORE

    return Path(config.invocation_params.dir, options.get(config, "storage") or DEFAULT_STORE)


def _check_baseline(config) -> str | None:
    """The baseline report this run is gated against: --duplexact-baseline, or the stored run
    --duplexact-compare names (resolved now, before this run can be stored itself)."""
    from .report.baseline import BaselineError, check_option
    from .report.store import StoreError, find

    path, ref = options.get(config, "baseline"), options.get(config, "compare")
    if path and ref:
        raise pytest.UsageError("--duplexact-baseline and --duplexact-compare both name a "
                                "baseline; give one")
    flag = "--duplexact-baseline"
    if ref:
        flag = f"--duplexact-compare={ref}"
        try:
            path = str(find(_store(config), ref))
        except StoreError as e:
            raise pytest.UsageError(f"{flag}: {e}") from None
    try:
        check_option(path, options.get(config, "baseline-alpha"))
    except BaselineError as e:
        raise pytest.UsageError(f"{flag}: {e}") from None
    return path


def build_harness(config, state) -> Harness:
    from .models import resolve_model
    from .judges.cache import RequestCache
    from .wiring import make_panel, make_policy, make_transcriber

    from .models import is_streaming

    model = resolve_model(state.model_spec, **state.settings["model_options"])
    cache_dir = Path(options.get(config, "cache-dir") or state.run_dir / "cache")
    timeout, judge_timeout = options.get(config, "timeout"), options.get(config, "judge-timeout")
    if not (timeout > 0 and judge_timeout > 0):
        raise pytest.UsageError("--duplexact-timeout and --duplexact-judge-timeout must be > 0")
    harness = Harness(
        model=model, model_name=state.model_spec, run_dir=state.run_dir,
        panel=make_panel(state.settings, cache_dir, judge_timeout),
        transcriber=make_transcriber(state.settings, cache_dir, judge_timeout),
        policy=make_policy(state.settings, cache_dir),
        seed=state.settings["selection"]["seed"],
        model_options=state.settings["model_options"],
        fingerprint=journal.fingerprint(state.settings),
        vad_cache=RequestCache(cache_dir),  # re-scoring the same audio skips the VAD
        timeout=timeout,
        bargein_branches=options.get(config, "bargein-branches") != "off",
    )
    concurrency = options.get(config, "concurrency")
    if concurrency < 1:
        raise pytest.UsageError("--duplexact-concurrency must be >= 1")
    if concurrency > 1 and is_streaming(model):  # a stepped model computes one trial at a time
        from .prefetch import Prefetcher

        harness.prefetcher = Prefetcher(harness.record_async, concurrency, timeout)
    return harness


def _publish(config, state, report: dict) -> None:
    """Where else the report goes: the run store (--duplexact-autosave) and the GitHub
    Actions job summary. Either failing is said, never fatal: the run dir has the report."""
    from .report import job_summary, store

    if options.get(config, "autosave"):
        try:
            saved = store.save(report, _store(config))
            state.messages.append(f"duplexact: stored this run as {saved}")
        except OSError as e:
            state.messages.append(f"duplexact: WARNING: could not store this run: {e}")
    try:
        written = job_summary.append(report, report_path=str(state.run_dir / REPORT_FILE))
    except OSError as e:
        state.messages.append(f"duplexact: WARNING: could not write the job summary: {e}")
    else:
        if written:
            state.messages.append(f"duplexact: summary appended to {written}")


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
    from .report.cost import PriceError, estimate, load_prices

    try:
        report["cost"] = estimate(report["usage"], load_prices(options.get(config, "prices")))
    except PriceError as e:  # checked at start; a file changed mid-run still ends the run
        state.messages.append(f"duplexact: WARNING: no cost estimate: {e}")
    missing = len({i.id for i in state.instances} - {o.id for o in outcomes})
    if missing:  # the report is incomplete: say so in it, and how to finish it
        report["notes"].append(
            f"{missing} of {len(state.instances)} selected instance(s) have no outcome "
            "(deselected, interrupted, or lost with a crashed worker); "
            f"pytest --duplexact-resume={state.run_dir} runs them")
    if "released" in state.settings:  # the paper side by side (released/paper.py)
        from .released.paper import paper_section

        report["paper_comparison"] = paper_section(report)
    baseline = state.baseline
    if baseline:  # regression gate (report/baseline.py): significant drops fail the run
        from .report.baseline import gate

        report["baseline"] = gate(report, baseline, options.get(config, "baseline-alpha"))
    state.report, state.gate_results = report, results
    unwritten = []
    for path in (state.run_dir / REPORT_FILE, options.get(config, "report")):
        if not path:
            continue
        try:  # each copy says where its recordings are, relative to itself ("." in the run dir)
            where = Path(path).resolve().parent
            try:
                rel = os.path.relpath(state.run_dir, where)
            except ValueError:  # another drive (Windows)
                rel = str(state.run_dir)
            write_json_atomic(Path(path), {**report, "run_dir": Path(rel).as_posix()})
        except OSError as e:  # full disk, read-only folder: say so once, keep the outcomes
            unwritten.append(f"duplexact: ERROR: could not write {path}: {e}")
    if unwritten:
        state.messages += unwritten + [
            f"duplexact: the finished instances are journaled in {state.run_dir / 'instances'}"
            f"; once there is room, pytest --duplexact-resume={state.run_dir} writes the report"]
        return 1 if exitstatus in (0, 1) else None
    _publish(config, state, report)
    state.messages.append(f"duplexact: run directory {state.run_dir} (recordings, timelines, "
                          "report.json)")
    if not (state.gates or baseline) or exitstatus not in (0, 1):
        return None  # no gates: pytest's own semantics; interrupted / usage errors stay
    errors = report["totals"]["errors"]
    passed = all(r.passed for r in results) and (not baseline or report["baseline"]["passed"])
    return 0 if passed and errors == 0 else 1
