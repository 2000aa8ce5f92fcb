"""Renamed modules whose old path the docs named keep working for one release, with a
DeprecationWarning (docs/architecture.md, "Moved modules")."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_duplexact

ROOT = Path(pytest_duplexact.__file__).resolve().parent.parent
MOVED = [("pipelines.streaming", "pipelines.streaming_duplex", "StreamingDuplex"),
         ("rules.base", "rules.action_rule", "ActionRule"),
         ("bridges.moshi", "bridges.moshi_bridge", "MoshiBridge")]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_the_old_path_warns_and_gives_every_name_of_the_new_module(old, new, name, monkeypatch):
    old, new = f"pytest_duplexact.{old}", f"pytest_duplexact.{new}"
    moved = importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old, raising=False)  # so the import runs the shim again
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new}"):
        shim = importlib.import_module(old)
    assert getattr(shim, name) is getattr(moved, name)
    for n in vars(moved):  # private names too, as the old module had them
        if not n.startswith("__"):
            assert getattr(shim, n) is getattr(moved, n), n


def test_the_old_bridge_command_runs_the_new_one_and_says_so():
    res = subprocess.run([sys.executable, "-m", "pytest_duplexact.bridges.moshi", "--help"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "usage: python -m pytest_duplexact.bridges.moshi_bridge" in res.stdout
    assert "run python -m pytest_duplexact.bridges.moshi_bridge" in res.stderr
