"""SIGTERM as a clean stop: a scheduler's time limit (Slurm sends SIGTERM, then SIGKILL after
its KillWait), a preemption or a plain ``kill`` ends the run the way Ctrl-C does: the trial in
flight is abandoned, every finished instance is already journaled, report.json is written
with what was measured, and one line names the resume command (docs/sharding.md).

Installed on the controller only (xdist workers are ended by their controller), in the main
thread, and only where SIGTERM still has its default action: a host program's own handler
is left alone."""

from __future__ import annotations

import signal
import threading

from ..pipelines import interrupt


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the first SIGTERM: pytest ends the session as
    interrupted (exit 2), and runs sessionfinish, so the report is written."""


class TerminationGuard:
    def __init__(self) -> None:
        self.received: str | None = None  # the signal's name once one arrived
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, self._handle)
        self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self._installed = False

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            return  # already stopping: writing the report must not be cut short again
        self.received = signal.Signals(signum).name
        interrupt.request()  # sticky, as a Ctrl-C is (pipelines/interrupt.py)
        raise Terminated(f"{self.received}: stopping cleanly")
