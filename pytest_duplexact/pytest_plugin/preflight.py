"""The checks a run passes before any instance runs (controller, at pytest_configure, after the
estimate): remote URLs that would carry a key in clear, the keys remote services need, the
model's own preflight, the data the built-in oracle needs, the baseline to gate against. Each
refuses with a pytest.UsageError naming the option; ``check()`` runs them in that order."""

from __future__ import annotations

import os

import pytest

from ..run.settings import RunSettings
from .config import RunConfig


def check(run: RunConfig, settings: RunSettings, instances) -> str | None:
    """Every check; returns the baseline report's path (check_baseline)."""
    check_urls(settings)
    check_keys(settings)
    check_model(run.model, settings)
    check_data(run.model, instances)
    return check_baseline(run)


def check_model(spec: str, settings: RunSettings) -> None:
    """Fail before any instance runs when the model cannot work at all (unknown name, missing
    API key): models may expose ``preflight(**options)`` on their factory."""
    from ..models import preflight

    try:
        preflight(spec, **settings.options)
    except Exception as e:  # the model's own, user-facing message
        raise pytest.UsageError(f"--duplexact-model={spec}: {e}") from None


def check_urls(settings: RunSettings) -> None:
    """Judge / transcriber / simulator base URLs that would carry the key in clear."""
    from ..remote.netsafety import insecure_url_problem

    if not (settings.judge or settings.audio_judge
            or settings.transcriber not in (None, "auto", "native", "offline")
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
    """A remote transcriber or the LLM simulator cannot be built without the API key (the
    judges can: without it they are off and say so): refused here, before the run folder
    exists, rather than as "the model could not be built" at the first instance."""
    from ..remote.calls import ConfigError, resolve_api_key

    for flag, value, remote in (
            ("--duplexact-transcriber", settings.transcriber,
             settings.transcriber not in (None, "auto", "native", "offline")),
            ("--duplexact-simulator", settings.simulator, settings.simulator == "llm")):
        if remote:
            try:
                resolve_api_key(None)
            except ConfigError as e:
                raise pytest.UsageError(f"{flag}={value}: {e}") from None


def check_data(spec: str, instances) -> None:
    """The built-in oracle speaks the model-side clips; without them it cannot run at all."""
    if spec == "oracle":
        from ..models.oracle import missing_clips

        why = missing_clips(instances)
        if why:
            raise pytest.UsageError(f"--duplexact-model=oracle: {why}")


def check_baseline(run: RunConfig) -> str | None:
    """The baseline report this run is gated against: --duplexact-baseline, or the stored run
    --duplexact-compare names (resolved now, before this run can be stored itself)."""
    from ..report.baseline import BaselineError, check_option
    from ..report.store import StoreError, find

    path, ref = run.baseline, run.compare
    if path and ref:
        raise pytest.UsageError("--duplexact-baseline and --duplexact-compare both name a "
                                "baseline; give one")
    flag = "--duplexact-baseline"
    if ref:
        flag = f"--duplexact-compare={ref}"
        try:
            path = str(find(run.store, ref))
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
