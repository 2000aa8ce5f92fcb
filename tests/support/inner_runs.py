"""The plugin run from a test through pytester (an "inner run"), one way for every test file:

- ``run(pytester, *args)``: pytest in the pytester folder, in a subprocess (a real start:
  plugin registration, exit status, output as a user sees it) with a deadline, or in process
  (``inprocess=True``: no process start, which costs seconds on a shared machine);
  ``runner(*fixed)``: ``run`` with a test file's usual arguments before each call's own;
  ``as_user(*fixed)``: a ``runner`` in process, in a user's bare folder (``AS_USER``);
- ``said(result)``: every non-blank line it printed, stdout then stderr;
- the fixture below.

A folder's plugin runs in process start in a bare folder: no pyproject, so pytest-asyncio
(our dev extra) warns that its loop scope is unset, and the warning lands in the outer run's
summary. A conftest that imports ``inner_runs_set_the_loop_scope`` gives every such run the
checkout's setting. Not global: the tests of a user's bare folder (pytest-asyncio blocked
with ``-p no:asyncio``) must see no asyncio ini key, which would warn "Unknown config option"
there."""

from __future__ import annotations

import faulthandler
from typing import Callable

import pytest

DEADLINE_S = 300.0  # a run's; generous: a run starts VAD and models on a busy host
STACKS = "inner-run-stacks.txt"  # an in-process run past its deadline: every thread's stack


def run(pytester, *args: str, inprocess: bool = False,
        timeout: float = DEADLINE_S) -> pytest.RunResult:
    """``pytest *args`` in ``pytester``'s folder: a subprocess ended at ``timeout``, or in
    process. An in-process run that passes ``timeout`` ends the whole test process, every
    thread's stack written first to ``STACKS`` in the run's folder (``faulthandler``; pytest
    holds file descriptor 2 while a test runs) and xdist reporting its worker crashed on this
    test: never a CI job that hangs. pytest-rerunfailures is kept out of an in-process run
    that does not ask for ``--reruns``: under xdist its configure opens a socket and a thread
    that nothing closes, one more per run in the same process."""
    if not inprocess:
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    if not any(a.startswith("--reruns") for a in args):
        args = ("-p", "no:rerunfailures", *args)
    with open(pytester.path / STACKS, "w") as stacks:
        faulthandler.dump_traceback_later(timeout, exit=True, file=stacks)
        try:
            return pytester.runpytest(*args)
        finally:
            faulthandler.cancel_dump_traceback_later()


def runner(*fixed: str, inprocess: bool = False,
           timeout: float = DEADLINE_S) -> Callable[..., pytest.RunResult]:
    """``run`` with ``fixed`` before each call's arguments (a file's selection, its model)."""
    def run_with(pytester, *args: str) -> pytest.RunResult:
        return run(pytester, *fixed, *args, inprocess=inprocess, timeout=timeout)
    return run_with


# A user's folder: the plugin without pytest-asyncio (our dev extra, not the benchmark's).
AS_USER = ("-p", "no:asyncio")


def as_user(*fixed: str, timeout: float = DEADLINE_S) -> Callable[..., pytest.RunResult]:
    """``runner(*fixed)`` in process, as a user's bare folder runs the plugin (``AS_USER``):
    each run builds its own config and session as a new pytest process does, without a
    process start's CPU."""
    return runner(*fixed, *AS_USER, inprocess=True, timeout=timeout)


def said(res: pytest.RunResult) -> list[str]:
    """Every non-blank line the run printed (stdout, then stderr)."""
    return [line for line in res.stdout.lines + res.stderr.lines if line.strip()]


@pytest.fixture(autouse=True)
def inner_runs_set_the_loop_scope(request):
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n")
