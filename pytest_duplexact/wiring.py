"""Builds the judges, the transcriber and the simulator policy a run's settings ask for.

Offline defaults need no network: no judges (judged stages are NOT_JUDGED), the model's native
transcript or the bundled offline ASR, and the rule-based simulator."""

from __future__ import annotations

from pathlib import Path

import pytest


def make_panel(settings: dict, cache_dir: Path, deadline: float | None = None):
    from .scoring import NoJudges

    if not settings.get("judge") and not settings.get("audio_judge"):
        return NoJudges()
    from .judges import JudgePanel

    return JudgePanel.from_options(judge_model=settings.get("judge"),
                                   audio_model=settings.get("audio_judge"),
                                   base_url=settings.get("judge_base_url"),
                                   cache_dir=cache_dir, deadline=deadline)


def make_transcriber(settings: dict, cache_dir: Path, deadline: float | None = None):
    """``None`` means: use the model's native transcript only."""
    name = settings.get("transcriber") or "auto"
    if name == "native":
        return None
    from .transcribe import get_transcriber

    if name == "auto":
        return get_transcriber("offline", cache_dir=cache_dir, lazy=True)
    policy = None
    if deadline is not None:
        from .judges.calls import policy_for

        policy = policy_for(deadline)
    return get_transcriber(name, cache_dir=cache_dir, base_url=settings.get("judge_base_url"),
                           policy=policy)


def make_policy(settings: dict, cache_dir: Path):
    name = settings.get("simulator") or "rule"
    if name == "rule":
        from .pipelines.simulator import RuleBasedSimulator

        return RuleBasedSimulator()
    if name == "llm":
        from .judges.simulator_llm import LLMSimulator

        return LLMSimulator.from_options(model=settings.get("simulator_model"),
                                         base_url=settings.get("judge_base_url"),
                                         cache_dir=cache_dir)
    raise pytest.UsageError(f"--duplexact-simulator={name!r}: use 'rule' or 'llm'")
