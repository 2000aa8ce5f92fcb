"""A Ctrl-C that always ends the run.

CPython's SIGINT handler raises KeyboardInterrupt in the main thread at its next bytecode.
When that bytecode belongs to a callback whose exceptions the interpreter ignores (a gc
callback such as hypothesis's, a ``__del__``, a weakref finalizer), it prints "Exception
ignored in ..." and the Ctrl-C is lost: the run goes on to its next instance
(tests/pipelines/test_interrupt.py shows it with a real signal).

The handler installed here raises as the default one does and also records the request. The
harness's waits on a trial (``watchdog.run_watched``, the prefetcher's and the batch
runner's result polls) call ``check()`` at each poll, so a swallowed Ctrl-C still ends the
run within one poll (0.25 s at most). pytest acknowledges the interrupt when it ends the
session (``pytest_keyboard_interrupt``), after which the report is written undisturbed.
"""

from __future__ import annotations

import signal
import threading

_requested = False
_installed = False


def request() -> None:
    """Remember that the run must stop (a signal handler calls it before it raises)."""
    global _requested
    _requested = True


def handle(signum, frame) -> None:
    """The SIGINT handler: remember the request, then raise as CPython's own handler does."""
    request()
    raise KeyboardInterrupt


def install() -> None:
    """In the main thread, and only where SIGINT still has CPython's default handler: a host
    program's own handler (or an ignored SIGINT) is left alone."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    signal.signal(signal.SIGINT, handle)
    _installed = True


def uninstall() -> None:
    global _installed
    if _installed and signal.getsignal(signal.SIGINT) is handle:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _installed = False


def check() -> None:
    """Raise KeyboardInterrupt again if a Ctrl-C came and pytest has not acted on it yet."""
    if _requested:
        raise KeyboardInterrupt


def acknowledge() -> None:
    """pytest has the interrupt (it is ending the session): later waits run undisturbed."""
    global _requested
    _requested = False
