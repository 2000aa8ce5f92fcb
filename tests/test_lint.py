"""The tree stays ruff-clean: import order and pyflakes (``[tool.ruff]`` in pyproject.toml)
over the package, the tests, the suites and the benchmarks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        pytest.skip("ruff is not installed (it is in the dev extra: pip install -e .[dev])")
    paths = [p for p in ("pytest_duplexact", "tests", "suites", "benchmarks", "conftest.py")
             if (ROOT / p).exists()]
    res = subprocess.run([find_ruff_bin(), "check", "--no-cache", "--output-format=concise",
                          *paths], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
