"""Ctrl-C in the middle of an instance ends the run cleanly: exit status 2 (interrupted) and no
page of nanobind "leaked instance" lines from soxr's resamplers, which the trial's worker
thread used to take with it to interpreter exit (watchdog.run_watched now ends the trial)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.runs import sigint_default

ROOT = Path(__file__).resolve().parents[2]

MODEL = textwrap.dedent('''
    import os, time
    from pathlib import Path
    import numpy as np

    class Slow:
        """A 24 kHz stepped model (so the run resamples its output with soxr) that takes
        its time: the interrupt lands while a trial holds its resamplers."""
        name = "slow"
        sample_rate = 24_000
        frame_size = 1_920

        def start(self, info):
            self.k = 0

        def step(self, frame):
            self.k += 1
            if self.k == 5:
                Path(os.environ["MARKER"]).write_text("stepping")
            time.sleep(0.02)
            return np.zeros(self.frame_size, np.float32)

        def finish(self):
            pass

    def factory(**options):
        return Slow()
''')


def test_ctrl_c_mid_instance_exits_interrupted_without_a_leak_dump(tmp_path):
    (tmp_path / "slow_model.py").write_text(MODEL)
    marker = tmp_path / "marker"
    log = tmp_path / "log.txt"
    # prepended, so the child imports this checkout's package, not an installed one
    path = os.pathsep.join(p for p in (str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH"))
                           if p)
    env = {**os.environ, "MARKER": str(marker), "PYTHONPATH": path}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "--duplexact-model=slow_model:factory",
             "--duplexact-run-dir=run", "-p", "no:cacheprovider", "-q"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=sigint_default)  # an inherited SIG_IGN: see its doc
    try:
        end = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < end, "the model never started stepping"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == pytest.ExitCode.INTERRUPTED, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "KeyboardInterrupt" in text
    assert "leaked" not in text and "nanobind" not in text, text[-3000:]
