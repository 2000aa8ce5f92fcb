"""Each import path that moved when models/ was arranged by role still imports, for one
release, as the very module at its new path, and warns (models/moved.py)."""

from __future__ import annotations

import importlib
import sys

import pytest

from pytest_duplexact.models.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_path_warns_and_is_the_new_module(old, monkeypatch):
    new = MOVED[old]
    pytest.importorskip(new.rpartition(".")[0])
    try:
        module = importlib.import_module(new)
    except ImportError as e:  # an optional package its module needs
        pytest.skip(f"{new}: {e}")
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        assert importlib.import_module(old) is module


def test_the_documented_imports_still_resolve(monkeypatch):
    """docs/models.md and docs/writing-an-adapter.md's imports, by their old paths."""
    for old in ("base", "streaming"):
        monkeypatch.delitem(sys.modules, f"pytest_duplexact.models.{old}", raising=False)
    with pytest.warns(DeprecationWarning):
        from pytest_duplexact.models.base import SessionInfo, StepOutput, SteppedModel
        from pytest_duplexact.models.streaming import AudioDelta, admitting
    from pytest_duplexact.models import contract, streaming_contract

    assert (SessionInfo, SteppedModel, StepOutput) == (
        contract.SessionInfo, contract.SteppedModel, contract.StepOutput)
    assert (AudioDelta, admitting) == (streaming_contract.AudioDelta,
                                       streaming_contract.admitting)


def test_a_name_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pytest_duplexact.models.no_such_adapter")
