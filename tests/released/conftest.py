"""The released-data tests' plugin runs in process get the checkout's pytest-asyncio loop
scope (tests/support/inner_runs.py); the conversion cache and the test mapping every module
here uses."""

from pathlib import Path

import pytest

from tests.released.snapshot_builder import TEST_MAPPING
from tests.support.inner_runs import inner_runs_set_the_loop_scope  # noqa: F401 (a fixture)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A conversion cache of the test's own (DUPLEXACT_CACHE_DIR)."""
    monkeypatch.setenv("DUPLEXACT_CACHE_DIR", str(tmp_path / "dx-cache"))
    return tmp_path / "dx-cache"


@pytest.fixture
def mapping(tmp_path) -> Path:
    """The test snapshot's mapping file (snapshot_builder.TEST_MAPPING)."""
    p = tmp_path / "mapping.toml"
    p.write_text(TEST_MAPPING)
    return p
