"""The checks a run passes before any instance runs (controller, at pytest_configure, after the
estimate): remote URLs that would carry a key in clear, the keys remote services need, the
model's own preflight, the data the built-in oracle needs, the baseline to gate against
(``check()`` runs them in that order), then, for a model behind a server, one connection to
it (``check_server``). Each refuses with a pytest.UsageError naming the option: one
``ERROR:`` line, exit status 4, before the run directory exists."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from ..listen.transcribe import is_local, is_openai
from ..run.settings import RunSettings
from .config import RunConfig


def check(run: RunConfig, settings: RunSettings, instances) -> str | None:
    """Every check; returns the baseline report's path (check_baseline)."""
    check_urls(settings)
    check_transcriber(settings)
    check_keys(settings)
    check_model(run.model, settings)
    check_data(run.model, instances)
    check_report_path(run)
    return check_baseline(run)


def check_report_path(run: RunConfig) -> None:
    """--duplexact-report's path can take a file, and --duplexact-autosave's store can keep
    a run: refused now, not after the whole run (both are written at its end, and a path
    that cannot hold them was found only then)."""
    from ..report.output import output_problem

    problem = run.report and output_problem(run.report, "--duplexact-report", "report.json")
    if problem:
        raise pytest.UsageError(problem)
    if run.autosave:  # the store is written at the end too: a run it cannot keep is refused
        from ..report.store.saved import store_problem

        problem = store_problem(run.store, Path(run.invocation_dir))
        if problem:
            raise pytest.UsageError(problem)


def check_model(spec: str, settings: RunSettings) -> None:
    """Fail before any instance runs when the model cannot work at all (unknown name, missing
    API key): models may expose ``preflight(**options)`` on their factory."""
    from ..models import preflight

    try:
        preflight(spec, **settings.options)
    except Exception as e:  # the model's own, user-facing message
        raise pytest.UsageError(f"--duplexact-model={spec}: {e}") from None


def check_channel(settings: RunSettings, model) -> None:
    """An echo that would need the model's output before a stepped model has produced it."""
    if model is None or not settings.channel:
        return
    from ..models import is_stepped
    from ..pipelines.channel import parse
    from ..pipelines.channelled import echo_problem

    if is_stepped(model) and (problem := echo_problem(parse(settings.channel), model)):
        raise pytest.UsageError(problem)


def check_server(run: RunConfig, settings: RunSettings) -> RunSettings:
    """A model behind a server: connect once now (models.probe), so a server that is not
    there, refuses the options or the key, speaks another scheme or is no model server at
    all stops the run in one line, before its run directory exists; and refuse more trials
    at once (--duplexact-batch, --duplexact-concurrency) than its READY says it serves. The
    settings come back with what answered (``served``: run.json and the report name it)."""
    from ..models import probe

    flag = f"--duplexact-model={run.model}"
    try:
        probed = probe(run.model, **settings.options)
    except Exception as e:  # the client's own, user-facing message
        raise pytest.UsageError(f"{flag}: {' '.join(str(e).split())}") from None
    if probed is None:
        return settings
    limit = probed.max_sessions
    for option, wanted in (("batch", run.batch), ("concurrency", run.concurrency)):
        if limit is not None and isinstance(wanted, int) and wanted > limit:
            where = f" at {probed.where}" if probed.where else ""
            raise pytest.UsageError(
                f"--duplexact-{option}={wanted}: the server{where} runs {limit} trial(s) at "
                f"once (its READY's max_sessions); use --duplexact-{option}={limit}, or "
                f"restart it to serve {wanted} (the kit's --max-sessions {wanted})")
    if run.resume:
        _same_served(run.resume, probed.model)
    return replace(settings, served={"model": probed.model, "description": probed.description})


def _same_served(run_dir: str, model: str) -> None:
    """A resumed run behind the same URL must still be served the model it started with:
    outcomes of two checkpoints are never mixed in one report."""
    from ..run.rundir import RunDir

    try:
        before = (RunDir(Path(run_dir)).read_run_settings().get("served") or {}).get("model")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # load_resumed said why
        return
    if before and model and before != model:
        raise pytest.UsageError(
            f"--duplexact-resume={run_dir}: the server now serves {model!r}; this run was "
            f"started with {before!r}. Serve {before!r} again to resume, or start a new run "
            "directory")


def check_urls(settings: RunSettings) -> None:
    """Judge / transcriber / simulator base URLs that would carry the key in clear."""
    from ..remote.netsafety import insecure_url_problem

    if not (settings.judge or settings.audio_judge
            or not is_local(settings.transcriber)
            or settings.simulator == "llm"):
        return  # nothing remote is asked for
    for what, url in (("--duplexact-judge-base-url", settings.judge_base_url),
                      *((name, os.environ.get(name)) for name in (
                          "DUPLEXACT_JUDGE_BASE_URL", "DUPLEXACT_AUDIO_JUDGE_BASE_URL",
                          "DUPLEXACT_SIMULATOR_BASE_URL", "DUPLEXACT_TRANSCRIBE_BASE_URL",
                          "OPENAI_BASE_URL"))):
        problem = insecure_url_problem(url, what)
        if problem:
            raise pytest.UsageError(problem)


def check_keys(settings: RunSettings) -> None:
    """A remote transcriber, the LLM simulator or a judge asked for by option cannot be
    built without the API key: refused here, before the run folder exists, rather than as
    "the model could not be built" at the first instance or, for a judge, a green run whose
    S was silently not judged. (A judge named only by its environment variable keeps the
    old way: off without a key, and the report says so.)"""
    from ..remote.calls import ConfigError, resolve_api_key, turned_off

    def asked(value) -> bool:
        return bool(value) and not turned_off(value)

    for flag, value, remote, hint in (
            ("--duplexact-transcriber", settings.transcriber,
             is_openai(settings.transcriber), ""),
            ("--duplexact-simulator", settings.simulator, settings.simulator == "llm", ""),
            ("--duplexact-judge", settings.judge, asked(settings.judge), _SELF_HOSTED),
            ("--duplexact-audio-judge", settings.audio_judge, asked(settings.audio_judge),
             _SELF_HOSTED)):
        if remote:
            try:
                resolve_api_key(None)
            except ConfigError as e:
                raise pytest.UsageError(f"{flag}={value}: {e}{hint}") from None


# a self-hosted judge's server may want no key, but the client sends one
_SELF_HOSTED = " (any value for a self-hosted server that checks none)"


def check_transcriber(settings: RunSettings) -> None:
    """An unknown transcriber name, or an offline one asked for by name whose package is not
    installed, is refused here, not as an error in every instance ("auto" stays lazy: only
    models without a native transcript need it)."""
    from ..listen.transcribe import UnknownTranscriber, check_name, get_transcriber
    from ..listen.transcribe_offline import TranscriberUnavailable

    name = settings.transcriber
    if name in (None, "auto", "native"):
        return
    try:
        if is_local(name):
            get_transcriber(name, lazy=True).check()
        else:  # remote ones need their key (check_keys); a factory is built by each worker
            check_name(name)
    except (UnknownTranscriber, TranscriberUnavailable, ValueError) as e:
        raise pytest.UsageError(f"--duplexact-transcriber={name}: {e}") from None


def check_data(spec: str, instances) -> None:
    """The built-in oracle speaks the model-side clips; without them it cannot run at all.
    ``recorded:DIR`` must hold a recording of at least one selected instance."""
    from ..models import RECORDED_PREFIX

    if spec.strip().startswith(RECORDED_PREFIX):
        from ..models.providers.recorded import replay_problem

        why = replay_problem(spec.strip()[len(RECORDED_PREFIX):], {i.id for i in instances})
        if why:
            raise pytest.UsageError(f"--duplexact-model={spec}: {why}")
    if spec == "oracle":
        from ..models.providers.oracle import missing_clips

        why = missing_clips(instances)
        if why:
            raise pytest.UsageError(f"--duplexact-model=oracle: {why}")


def check_baseline(run: RunConfig) -> str | None:
    """The baseline report this run is gated against: --duplexact-baseline, or the stored run
    --duplexact-compare names (resolved now, before this run can be stored itself)."""
    from ..report.sections.baseline import BaselineError, check_option
    from ..report.store.saved import StoreError, find

    path, ref = run.baseline, run.compare
    if path and ref:
        raise pytest.UsageError("--duplexact-baseline and --duplexact-compare both name a "
                                "baseline; give one")
    flag = "--duplexact-baseline"
    if ref:
        flag = f"--duplexact-compare={ref}"
        try:
            path = str(find(run.store, ref, model=run.model))
        except StoreError as e:
            raise pytest.UsageError(f"{flag}: {e}") from None
    run.need("baseline-alpha")
    try:
        check_option(None, run.baseline_alpha)
    except BaselineError as e:  # the option that is wrong, not the baseline's
        raise pytest.UsageError(f"--duplexact-baseline-alpha: {e}") from None
    try:
        check_option(path, run.baseline_alpha)
    except BaselineError as e:
        raise pytest.UsageError(f"{flag}: {e}") from None
    return path
