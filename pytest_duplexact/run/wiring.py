"""Builds the judges, the transcriber and the simulator policy a run's settings
(settings.RunSettings) ask for.

Offline defaults need no network: no judges (judged stages are NOT_JUDGED), the model's native
transcript or the bundled offline ASR, and the rule-based simulator."""

from __future__ import annotations

from pathlib import Path

from .settings import RunSettings, SettingsError


def make_panel(settings: RunSettings, cache_dir: Path, deadline: float | None = None):
    from ..judges import JudgePanel

    if not settings.judge and not settings.audio_judge:
        return JudgePanel()  # no judges: judged stages are NOT_JUDGED

    return JudgePanel.from_options(judge_model=settings.judge,
                                   audio_model=settings.audio_judge,
                                   base_url=settings.judge_base_url,
                                   cache_dir=cache_dir, deadline=deadline)


def make_transcriber(settings: RunSettings, cache_dir: Path, deadline: float | None = None):
    """``None`` means: use the model's native transcript only."""
    name = settings.transcriber or "auto"
    if name == "native":
        return None
    from ..listen.transcribe import get_transcriber

    if name == "auto":
        return get_transcriber("offline", cache_dir=cache_dir, lazy=True)
    policy = None
    if deadline is not None:
        from ..remote.calls import policy_for

        policy = policy_for(deadline)
    return get_transcriber(name, cache_dir=cache_dir, base_url=settings.judge_base_url,
                           policy=policy)


def make_policy(settings: RunSettings, cache_dir: Path):
    name = settings.simulator or "rule"
    if name == "rule":
        from ..pipelines.simulator import RuleBasedSimulator

        return RuleBasedSimulator()
    if name == "llm":
        from ..pipelines.simulator_llm import LLMSimulator

        return LLMSimulator.from_options(model=settings.simulator_model,
                                         base_url=settings.judge_base_url,
                                         cache_dir=cache_dir)
    raise SettingsError(f"--duplexact-simulator={name!r}: use 'rule' or 'llm'")
