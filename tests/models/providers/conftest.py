"""Fixtures for the realtime tests."""

from __future__ import annotations

import secrets

import pytest


@pytest.fixture
def api_key(monkeypatch) -> str:
    """A fresh fake key per test, so a leak check can search for this exact string."""
    key = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return key
