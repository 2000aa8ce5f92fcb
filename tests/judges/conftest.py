"""Fixtures for the judge tests (helpers live in judgekit.py)."""

from __future__ import annotations

import pytest

from pytest_duplexact.judges import RequestCache
from tests.fakes import openai_server  # noqa: F401  (the fixture)
from tests.judges.judgekit import FAKE_KEY, Sleeps

_ENV = ("DUPLEXACT_JUDGE_MODEL", "DUPLEXACT_JUDGE_BASE_URL", "DUPLEXACT_AUDIO_JUDGE_MODEL",
        "DUPLEXACT_AUDIO_JUDGE_BASE_URL", "DUPLEXACT_SIMULATOR_MODEL",
        "DUPLEXACT_SIMULATOR_BASE_URL", "DUPLEXACT_TRANSCRIBE_MODEL",
        "DUPLEXACT_TRANSCRIBE_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No test here sees the developer's real configuration or key."""
    for var in _ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fake_key(monkeypatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    return FAKE_KEY


@pytest.fixture
def cache(tmp_path) -> RequestCache:
    return RequestCache(tmp_path / "cache")


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
