"""The plugin run from a test through pytester (an "inner run"), one way for every test file:

- ``run(pytester, *args)``: pytest in the pytester folder, in a subprocess (a real start:
  plugin registration, exit status, output as a user sees it) with a deadline, or in process
  (``inprocess=True``: no process start, which costs seconds on a shared machine);
  ``runner(*fixed)``: ``run`` with a test file's usual arguments before each call's own;
- ``said(result)``: every non-blank line it printed, stdout then stderr;
- the fixture below.

A folder's plugin runs in process start in a bare folder: no pyproject, so pytest-asyncio
(our dev extra) warns that its loop scope is unset, and the warning lands in the outer run's
summary. A conftest that imports ``inner_runs_set_the_loop_scope`` gives every such run the
checkout's setting. Not global: the tests of a user's bare folder (pytest-asyncio blocked
with ``-p no:asyncio``) must see no asyncio ini key, which would warn "Unknown config option"
there."""

from __future__ import annotations

from typing import Callable

import pytest

DEADLINE_S = 300.0  # a subprocess run's; generous: a run starts VAD and models on a busy host


def run(pytester, *args: str, inprocess: bool = False,
        timeout: float = DEADLINE_S) -> pytest.RunResult:
    """``pytest *args`` in ``pytester``'s folder: a subprocess ended at ``timeout``, or in
    process (no deadline there: the outer run's own)."""
    if inprocess:
        return pytester.runpytest(*args)
    return pytester.runpytest_subprocess(*args, timeout=timeout)


def runner(*fixed: str, inprocess: bool = False,
           timeout: float = DEADLINE_S) -> Callable[..., pytest.RunResult]:
    """``run`` with ``fixed`` before each call's arguments (a file's selection, its model)."""
    def run_with(pytester, *args: str) -> pytest.RunResult:
        return run(pytester, *fixed, *args, inprocess=inprocess, timeout=timeout)
    return run_with


def said(res: pytest.RunResult) -> list[str]:
    """Every non-blank line the run printed (stdout, then stderr)."""
    return [line for line in res.stdout.lines + res.stderr.lines if line.strip()]


@pytest.fixture(autouse=True)
def inner_runs_set_the_loop_scope(request):
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n")
