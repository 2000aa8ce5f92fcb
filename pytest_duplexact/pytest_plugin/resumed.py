"""What ``pytest --duplexact-resume=DIR`` takes from the run it resumes: the model, its
options, the data, the selection (a shard stays that shard) and the scoring settings, read
from the run's run.json, so the command the run prints after Ctrl-C, ``-x`` or a failed
report write works as printed. An option the user sets still wins (options.get); what was
taken is said once, as the equivalent command-line options."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..data.instance import bundled_root
from ..run.rundir import RUN_FILE, RunDir
from ..run.settings import RunSettings, SettingsError
from . import options

# option name -> settings field, for the single-valued options a resumed run keeps
_FIELDS = {"judge": "judge", "judge-base-url": "judge_base_url", "audio-judge": "audio_judge",
           "transcriber": "transcriber", "simulator": "simulator",
           "simulator-model": "simulator_model", "bargein-branches": "bargein_branches",
           "channel": "channel"}


def stored_values(settings: RunSettings) -> dict:
    """Option name -> the value the run was started with (unset ones left out)."""
    sel = settings.selection
    released = settings.released if isinstance(settings.released, dict) else {}
    values = {
        "model": settings.model,
        "model-option": [f"{k}={v}" for k, v in settings.model_options],
        "data": released.get("spec") or settings.dataset,
        "action": list(sel.actions), "condition": list(sel.conditions),
        "scenario": list(sel.scenarios), "source": list(sel.sources),
        "corpus": list(sel.corpora), "limit": sel.limit, "seed": sel.seed or None,
        "shard": None if sel.shard is None else "%d/%d" % sel.shard,
        **{opt: getattr(settings, f) for opt, f in _FIELDS.items()},
    }
    if values["data"] and Path(values["data"]) == bundled_root():
        values["data"] = None  # the default: a reinstalled package moves it
    return {k: v for k, v in values.items()
            if v not in (None, []) and v != options.BY_NAME[k].default}


def _read(resume: str) -> RunSettings:
    folder = Path(resume)
    run_file = RunDir(folder).run_file
    if folder.exists() and not folder.is_dir():
        raise pytest.UsageError(f"--duplexact-resume={resume}: a file, not a run directory; "
                                "give the folder a run printed as 'run directory' (it holds "
                                f"{RUN_FILE})")
    if not folder.is_dir():
        raise pytest.UsageError(f"--duplexact-resume={resume}: no such folder")
    if not run_file.is_file():
        raise pytest.UsageError(f"--duplexact-resume={resume}: no {RUN_FILE} there, so the "
                                "model and selection of that run are unknown; is it a "
                                "DuplexAct run directory?")
    try:
        return RunSettings.from_dict(RunDir(folder).read_run_settings())
    except (ValueError, KeyError, TypeError) as e:  # SettingsError is a ValueError
        what = str(e) if isinstance(e, SettingsError) else f"{type(e).__name__}: {e}"
        raise pytest.UsageError(
            f"--duplexact-resume={resume}: {RUN_FILE} cannot be read ({what}); give the model "
            "and its options yourself (--duplexact-model=NAME --duplexact-model-option=K=V) "
            "or start a new run directory") from None


def load(config: pytest.Config) -> str | None:
    """Fill the resumed run's settings in under the options the user did not set; returns
    the line saying what was taken (None when not resuming)."""
    resume = options.get(config, "resume")
    if not resume:
        return None
    given = options.get(config, "run-dir")
    if given and Path(given).resolve() != Path(resume).resolve():
        raise pytest.UsageError(
            f"--duplexact-resume={resume} and --duplexact-run-dir={given}: a resumed run "
            "continues in its own folder; drop --duplexact-run-dir")
    values = stored_values(_read(resume))
    taken = {k: v for k, v in values.items() if not options.given(config, k)}
    config.stash[options.RESUMED] = taken
    if not taken:
        return None
    flags = [f"--duplexact-{name}=" + (",".join(value) if isinstance(value, list) and
                                        name != "model-option" else str(value))
             for name, value in taken.items() if name != "model-option"]
    flags[1:1] = [f"--duplexact-model-option={v}" for v in taken.get("model-option", ())]
    return (f"duplexact: resuming with the run's own settings from its {RUN_FILE}: "
            f"{' '.join(flags)} (an option given on the command line overrides one)")
