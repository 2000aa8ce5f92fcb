"""The oracle, with a gate a test can close: how tests/cluster catches a Slurm task mid-run
without racing a fast model. Behaviour (and so every verdict) is the oracle's.

When ``$DUPLEXACT_GATE/hold-<array task id>`` exists, the task's ``HOLD_AT``-th trial writes
``held-<array task id>-<pid>`` and waits until the hold file is gone (at most
``HOLD_DEADLINE_S``, then it goes on: a forgotten gate never hangs a job)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pytest_duplexact.models.providers.oracle import OracleModel

HOLD_AT = 2
HOLD_DEADLINE_S = 600.0


class GatedOracle(OracleModel):
    _trials = 0  # per process: the trials this task has started

    def start(self, info) -> None:
        GatedOracle._trials += 1
        gate, task = os.environ.get("DUPLEXACT_GATE"), os.environ.get("SLURM_ARRAY_TASK_ID")
        if gate and task is not None and GatedOracle._trials == HOLD_AT:
            hold = Path(gate) / f"hold-{task}"
            if hold.exists():
                (Path(gate) / f"held-{task}-{os.getpid()}").touch()
                until = time.monotonic() + HOLD_DEADLINE_S
                while hold.exists() and time.monotonic() < until:
                    time.sleep(0.05)
        super().start(info)
