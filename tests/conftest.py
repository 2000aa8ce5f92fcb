"""The tests' one import style: ``tests`` and every folder below it are packages, and a test
imports a helper by its absolute name, ``from tests.<folder>.<module> import ...`` (shared
builders: ``tests.support.builders``). pytest puts the checkout on sys.path (the top-level
conftest.py sits there), so plain ``pytest`` and ``python -m pytest`` import each module
under that one name. Folders mirror the package floors (docs/architecture.md); the fakes
under tests/fakes also run as scripts, so they import their siblings by bare name.

A folder's fixtures live in its conftest.py, its helpers in a module beside its tests."""

from __future__ import annotations

import pytest

# Helper modules hold the assertions many tests share: give them pytest's messages. (Test
# modules and conftests are rewritten anyway; these are imported first from here on.)
pytest.register_assert_rewrite(
    "tests.support", "tests.support.realtime", "tests.pipelines.helpers",
    "tests.rules.helpers", "tests.report.helpers", "tests.judges.judgekit",
    "tests.bridges.support", "tests.bridges.model_support", "tests.released.snapshot_builder")


def pytest_collection_modifyitems(items):
    """The Slurm tests first: they wait minutes on the scheduler while using little of this
    process, so under ``--dist worksteal`` they run beside everything else, never as the tail."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith("tests/cluster/") else 1)
