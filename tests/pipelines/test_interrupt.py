"""A Ctrl-C that a callback swallows still ends the run (pipelines/interrupt.py).

CPython runs a signal's handler at the main thread's next bytecode; inside a gc callback
(hypothesis registers one) the KeyboardInterrupt it raises is printed as "Exception ignored"
and lost: the held instance would run on to its 60 s deadline and the run go on. Every wait
of the harness on a trial raises it again at its next poll.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_duplexact.models.providers.silent import SilentModel
from pytest_duplexact.pipelines import interrupt
from pytest_duplexact.run.batch import BatchRunner
from pytest_duplexact.run.prefetch import Prefetcher
from tests.support.runs import sigint_default

ROOT = Path(__file__).resolve().parents[2]
# A trial that would run this long unless the interrupt ends it: far beyond any poll, so a
# loaded machine cannot make a working guard look broken, and a broken one cannot pass.
TRIAL_S = 30.0
ENDED_S = 10.0

SWALLOWED = textwrap.dedent('''
    import asyncio, gc, os, signal, sys, time
    from pytest_duplexact.pipelines import interrupt, watchdog

    interrupt.install()
    armed = [True]

    def callback(phase, info):
        if phase == "start" and armed:
            armed.clear()
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs here, inside the callback
                pass

    gc.callbacks.append(callback)
    gc.collect()  # the Ctrl-C is raised in the callback: CPython prints it and drops it
    gc.callbacks.remove(callback)
    print("went on", flush=True)

    async def trial():
        for _ in range(int(TRIAL_S * 10)):
            watchdog.beat()
            await asyncio.sleep(0.1)

    start = time.monotonic()
    try:
        watchdog.run_watched(trial, timeout=60, what="instance x")
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - start:.1f} s", flush=True)
        sys.exit(0)
    sys.exit(3)
''').replace("TRIAL_S", repr(TRIAL_S))


def test_a_ctrl_c_lost_in_a_gc_callback_still_ends_the_watched_trial(tmp_path):
    script = tmp_path / "swallowed.py"
    script.write_text(SWALLOWED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    res = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True,
        timeout=TRIAL_S + 30,
        preexec_fn=sigint_default)  # an inherited SIG_IGN: see its doc
    # the premise: CPython did swallow it, and the script went on
    assert "Exception ignored" in res.stderr and "KeyboardInterrupt" in res.stderr, res.stderr
    assert "went on" in res.stdout
    assert res.returncode == 0, res.stdout + res.stderr
    took = float(res.stdout.split("interrupted after ")[1].split(" s")[0])
    assert took < ENDED_S


@pytest.fixture
def swallowed():
    """A Ctrl-C whose KeyboardInterrupt was lost (handled as CPython handles one raised in a
    gc callback) a moment after the wait starts; the flag is cleared afterwards, as pytest's
    ``pytest_keyboard_interrupt`` does, so no other test sees it."""
    def lose_it():
        time.sleep(0.3)
        try:
            interrupt.handle(2, None)
        except KeyboardInterrupt:
            pass

    thread = threading.Thread(target=lose_it)
    thread.start()
    yield
    thread.join()
    interrupt.acknowledge()


def _inst(k):
    return SimpleNamespace(id=f"i{k}")


async def _long_trial(instance, factory=None):
    await asyncio.sleep(TRIAL_S)


@pytest.mark.parametrize("waiter", [
    lambda: Prefetcher(_long_trial, concurrency=1),
    lambda: BatchRunner(SilentModel(), _long_trial, 1, timeout=60.0),
], ids=["prefetcher", "batch_runner"])
def test_a_waiting_test_raises_a_swallowed_ctrl_c(swallowed, waiter):
    runner = waiter()
    try:
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            runner.result(_inst(0))
        assert time.monotonic() - start < ENDED_S
    finally:
        runner.close()


def test_once_pytest_has_it_later_waits_run_undisturbed():
    interrupt.request()
    with pytest.raises(KeyboardInterrupt):
        interrupt.check()
    interrupt.acknowledge()
    interrupt.check()  # the report's waits after the interrupt: nothing raised


def test_a_ctrl_c_swallowed_during_a_trial_shorter_than_a_poll_still_ends_the_run():
    """A stepped built-in's trial can end within one poll of the watch (0.25 s): the check at
    each poll never ran, and a Ctrl-C lost in a callback during it (seen: soundfile's cffi
    callback) let the run go on to its end, exit 0."""
    from pytest_duplexact.pipelines import watchdog

    async def quick():
        try:
            interrupt.handle(2, None)  # the Ctrl-C, lost where exceptions are ignored
        except KeyboardInterrupt:
            pass
        return "done"

    try:
        with pytest.raises(KeyboardInterrupt):
            watchdog.run_watched(quick, timeout=60, what="instance q", poll=5.0)
    finally:
        interrupt.acknowledge()
