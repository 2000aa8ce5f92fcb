"""What a run is, from its RunConfig (config.py): the dataset it reads, its RunSettings, its run
directory and, under --duplexact-resume, the outcomes it reuses. The session (session.py)
calls these at pytest_configure, in this order; each refuses with a pytest.UsageError that
names the option."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from .. import __version__
from ..data.instance import DatasetError, bundled_root, check_dataset
from ..report.store.saved import slug
from ..rules import requires
from ..run import journal
from ..run.rundir import RUN_FILE, RunDir, claim_new
from ..run.settings import RunSettings
from .config import RunConfig

_BRANCH_CLIPS = ("branch_acknowledged", "branch_ignored")


def load_dataset(config: pytest.Config, run: RunConfig):
    """The checked dataset (data.instance.Dataset) and, for hf: data, what the run records
    about the released data (pytest_plugin/released_data.py), else None."""
    data = run.data
    released = None
    if data and str(data).startswith("hf:"):  # the released benchmark (released/)
        from .released_data import resolve_for_run

        root, released = resolve_for_run(config, run, data)
    else:
        root = Path(data or bundled_root()).resolve()
        if run.data_mapping:
            raise pytest.UsageError(
                f"--duplexact-data-mapping={run.data_mapping}: a mapping "
                "applies to released data only (--duplexact-data=hf:OWNER/NAME or "
                f"hf:/folder), and this run reads {root}; drop the mapping or use hf: data")
    dataset, problems = check_dataset(root, requires=requires)
    if problems:
        raise pytest.UsageError(f"--duplexact-data={root}: refusing to start.\n"
                                + str(DatasetError(problems)))
    return dataset, released


def dataset_fingerprint(dataset) -> str:
    """sha256 of the manifest, the header and the bytes of every clip the loaded dataset's
    instances name (sorted by path relative to the dataset folder): which instances,
    annotations and audio. Content, not mtimes, so shards cloned on different machines agree;
    a re-encoded or replaced clip makes stored outcomes stale (resume re-runs them). Cost:
    one read of the audio per run (the bundled 6.6 MB in about 60 ms, 140 files)."""
    root = Path(dataset.root)
    h = hashlib.sha256()
    for name in ("dataset.json", "instances.jsonl"):
        p = root / name
        h.update(name.encode())
        h.update(p.read_bytes() if p.is_file() else b"")
    # the loader checked that every clip exists and lies inside the folder
    clips = {Path(c.path).relative_to(root.resolve()).as_posix(): Path(c.path)
             for inst in dataset.instances for c in inst.clips.values()}
    for rel in sorted(clips):
        h.update(b"\0" + rel.encode("utf-8", "surrogateescape") + b"\0")
        with open(clips[rel], "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def settings_of(run: RunConfig, dataset, *, released: dict | None = None) -> RunSettings:
    """The run's settings (what its outcomes depend on, and what run.json records)."""
    # recorded (and fingerprinted) only for data that has branch clips: it changes what
    # those instances hear, and nothing else
    has_branches = any(r in i.clips for i in dataset.instances for r in _BRANCH_CLIPS)
    return RunSettings(
        model=run.model,
        model_options=run.model_options,
        dataset=str(dataset.root),
        dataset_fingerprint=dataset_fingerprint(dataset),
        judge=run.judge,
        judge_base_url=run.judge_base_url,
        audio_judge=run.audio_judge,
        transcriber=run.transcriber,
        simulator=run.simulator,
        simulator_model=run.simulator_model if run.simulator == "llm" else None,
        scoring_version=__version__,
        selection=run.selection,
        bargein_branches=run.bargein_branches if has_branches else None,
        channel=run.channel,
        released=released,
    )


def resolve_run_dir(run: RunConfig, claim: bool = True) -> Path:
    """The run directory: the controller's (an xdist worker), the resumed one, the given one
    (refused when it holds files), else a new default one, claimed (created) unless ``claim``
    is false (--collect-only measures nothing: it gets a path, never a folder)."""
    if run.assigned_run_dir is not None:
        return run.assigned_run_dir
    if run.resume:  # resumed.load refused another --duplexact-run-dir already
        return Path(run.resume).resolve()
    given = run.run_dir
    if given:
        run_dir = Path(given).resolve()
        under = _under_a_file(run_dir)
        if under is not None:  # said now, before the estimate and the preflight
            raise pytest.UsageError(f"--duplexact-run-dir={given}: {under} is a file, so no "
                                    f"folder can be made under it; {_CHOOSE}")
        if _holds_files(run_dir):
            raise pytest.UsageError(
                f"--duplexact-run-dir={given}: {run_dir} is not empty{_what_run(run_dir)}; "
                f"continue that run with --duplexact-resume={given}, or choose a new folder")
        return run_dir
    shard = run.selection.shard
    stamp = time.strftime("%Y%m%d-%H%M%S")
    part = "" if shard is None else "-shard%dof%d" % shard  # shards of one run never collide
    base = run.invocation_dir / "duplexact-runs" / f"{slug(run.model)}-{stamp}{part}"
    if not claim:
        return base.resolve()
    try:
        return claim_new(base)  # runs started in the same second: base-2, base-3, ...
    except OSError as e:  # a read-only folder, a duplexact-runs that is a file
        raise pytest.UsageError(f"{run_dir_flag(run)}: cannot make the run directory {base} "
                                f"({e.strerror or e}); {_CHOOSE}") from None


_CHOOSE = "choose a folder you can write with --duplexact-run-dir=DIR"


def _under_a_file(path: Path) -> Path | None:
    """The first existing part of ``path`` that is not a folder, if any."""
    for part in reversed([path, *path.parents]):
        if not part.exists():
            return None
        if not part.is_dir():
            return part
    return None


def run_dir_flag(run: RunConfig) -> str:
    """How the user chose the run directory, for a message that names the option."""
    if run.resume:
        return f"--duplexact-resume={run.resume}"
    if run.run_dir:
        return f"--duplexact-run-dir={run.run_dir}"
    return "the default run directory (duplexact-runs/ where pytest runs)"


def remove_if_empty(folder: Path) -> None:
    """A default run directory claimed for a run that never started; and its duplexact-runs/
    parent too when nothing else is in it (a refused first run leaves no litter)."""
    for f in (folder, folder.parent):
        try:
            f.rmdir()
        except OSError:  # not empty, or gone
            return


def _holds_files(folder: Path) -> bool:
    from ..run.runlock import LOCK_FILE

    try:
        return any(p.name != LOCK_FILE for p in folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return folder.exists()


def _what_run(run_dir: Path) -> str:
    try:
        return f" (it holds a run of model {RunDir(run_dir).read_run_settings()['model']!r})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def load_resumed(run_dir: Path, settings: RunSettings, wanted_ids: set[str],
                 tolerance_ms: float | None) -> tuple[dict, list, set]:
    """Finished outcomes reusable under ``settings`` (journal.py decides, instance by
    instance, from each outcome's fingerprint and files) and the messages for the terminal.
    Harness and judge errors are retried; outcomes scored under other settings, or whose
    trial was later than this run's timing tolerance (``tolerance_ms``), are re-run, never
    mixed in. Third: the instances scored again from the recording kept when the scoring
    worker died on them (journal.Status.RESCORE), without calling the model."""
    run_file = RunDir(run_dir).run_file
    if not run_file.is_file():
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: no {RUN_FILE} there; is it a "
                                "DuplexAct run directory?")
    try:
        old = RunSettings.from_dict(RunDir(run_dir).read_run_settings())
    except (ValueError, KeyError, TypeError) as e:  # SettingsError is a ValueError
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: {RUN_FILE} is damaged "
                                f"({type(e).__name__}: {e}); start a new run directory") from None
    diff = settings.identity_changes(old)
    if diff:
        raise pytest.UsageError(f"--duplexact-resume={run_dir}: this is a different run "
                                f"({'; '.join(diff)}); start a new run directory instead")
    found = journal.scan(run_dir, wanted_ids, settings.fingerprint(), tolerance_ms)
    messages = [f"duplexact: resuming {run_dir}: {found.summary()}"]
    changed = settings.scoring_changes(old)
    stale = found.count(journal.Status.STALE)
    if changed or stale:
        why = f"settings changed ({'; '.join(changed)})" if changed else \
            "some outcomes were stored under other settings"
        messages.append(f"duplexact: WARNING: {why}: {stale} stored outcome(s) scored under "
                        "the old settings are invalidated and re-run, never mixed with new ones")
    return found.finished, messages, found.rescore


def open_run_dir(run_dir: Path, settings: RunSettings, flag: str = "the run directory"):
    """Lock the run directory for this run (runlock.RunLock, returned) and write its run.json;
    refused when another run holds it or it cannot be made or written, in one line naming
    ``flag`` (``run_dir_flag``: the option that chose it)."""
    from ..run.runlock import RunDirLocked, RunLock

    try:
        lock = RunLock.acquire(run_dir)
    except RunDirLocked as e:
        raise pytest.UsageError(str(e)) from None
    except OSError as e:  # /proc/x, a read-only or vanished parent, a path under a file
        raise pytest.UsageError(
            f"{flag}: cannot make the run directory {run_dir} ({e.strerror or e}); "
            f"{_CHOOSE}") from None
    try:
        RunDir(run_dir).write_run(settings.to_dict(), __version__, settings.fingerprint())
    except OSError as e:
        lock.release()
        raise pytest.UsageError(f"{flag}: cannot write the run directory {run_dir} "
                                f"({e.strerror or e}); {_CHOOSE}") from None
    return lock
