"""Servers for the tests and benchmarks, each with a guaranteed stop:

- ``child(script, *args)``: a fake (tests/fakes/*.py, or any script that prints ``PORT <n>``
  first and serves until its stdin closes) in its own process, so its work does not share
  the test's event loop. The port is read with a deadline; stopping closes its stdin (the
  fakes then write their ground truth), and terminates, then kills, one that does not end.
- ``threaded(server)``: a ``serve_forever`` server (``socketserver``, ``http.server``,
  ``websockets.sync``) bound to 127.0.0.1:0, served by a daemon thread and shut down on exit.
- ``load_fake_server(name)``: a fake's module, loaded by path once (the fakes also run as
  scripts, importing their siblings by bare name)."""

from __future__ import annotations

import importlib.util
import queue
import re
import socketserver
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parents[1] / "fakes"
PORT = re.compile(r"^PORT (\d+)$")  # the fakes' first line (fake_ws.serve_until_stdin_closes)


class Child:
    """A server script in its own process; ``port`` is the one it printed. A ``with`` block
    (or ``stop()``, which may come earlier) ends it."""

    def __init__(self, argv: list[str], *, env: dict | None = None, cwd: Path | None = None,
                 stderr: Any = None, start_s: float = 60.0, stop_s: float = 30.0):
        self.argv, self.stop_s = argv, stop_s
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=env, cwd=cwd)
        self.line = self._first_line(start_s)
        m = PORT.match(self.line.strip())
        if m is None:
            self._end()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self._close_pipes()
            raise ChildFailed(f"{Path(argv[1]).name} did not start: its first line is "
                              f"{self.line!r}{' (stderr below)' if err else ''}\n{err[-3000:]}",
                              err)
        self.port = int(m[1])

    def _first_line(self, deadline_s: float) -> str:
        """Its first line, read in a helper thread: a child that prints nothing (hung in an
        import, a full pipe) is ended at the deadline instead of blocking the test."""
        box: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: box.put(self.proc.stdout.readline()), daemon=True,
                         name="child-first-line").start()
        try:
            return box.get(timeout=deadline_s)
        except queue.Empty:
            self._end()
            try:  # the reader sees the end of the pipe: let it return before the pipe closes
                box.get(timeout=10)
            except queue.Empty:
                pass
            self._close_pipes()
            raise ChildFailed(f"{Path(self.argv[1]).name} printed no port within "
                              f"{deadline_s:g} s", "") from None

    def stop(self) -> int:
        """Close its stdin and wait for it; terminate, then kill, one still running after
        ``stop_s``, and say so. Returns its exit status; a second call only returns it."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=self.stop_s)
            except subprocess.TimeoutExpired:
                self._end()
                raise ChildFailed(f"{Path(self.argv[1]).name} did not stop within "
                                  f"{self.stop_s:g} s of its stdin closing (killed)", "") from None
        self._close_pipes()
        return self.proc.returncode

    def _end(self) -> None:
        """Terminate, then kill: the stop of a child that did not start or did not stop."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            self.stop()
        except ChildFailed:
            if exc_type is None:  # else the body's own error is the one to see
                raise


class ChildFailed(RuntimeError):
    """A child that did not start or did not stop; ``stderr``: what it printed there, when
    captured (``stderr=subprocess.PIPE``)."""

    def __init__(self, message: str, stderr: str):
        super().__init__(message)
        self.stderr = stderr


def child(script: Path | str, *args: str, python: str = sys.executable, **options: Any) -> Child:
    """``python script *args`` started, its port read (``options``: ``env``, ``cwd``,
    ``stderr``, ``start_s``, ``stop_s``). A bare name is a fake of tests/fakes."""
    path = Path(script) if Path(script).is_absolute() else FAKES / script
    return Child([python, str(path), *map(str, args)], **options)


class Threaded:
    """``server`` served by a daemon thread; ``port`` its port on 127.0.0.1."""

    def __init__(self, server: Any, *, poll_s: float | None = None, stop_s: float = 30.0):
        self.server, self.stop_s = server, stop_s
        self.port = server.socket.getsockname()[1]
        args = () if poll_s is None else (poll_s,)  # socketserver's poll: the shutdown's delay
        self.thread = threading.Thread(target=server.serve_forever, args=args, daemon=True,
                                       name=f"threaded-{type(server).__name__}")

    def start(self) -> int:
        self.thread.start()
        return self.port

    def stop(self) -> None:
        """Shut the server down, wait for its thread (``stop_s`` at most) and close its
        socket. A second call does nothing."""
        if self.thread.ident is None or not self.thread.is_alive():
            self._close()
            return
        self.server.shutdown()
        self.thread.join(self.stop_s)
        self._close()
        if self.thread.is_alive():
            raise RuntimeError(f"{self.thread.name} did not stop within {self.stop_s:g} s")

    def _close(self) -> None:
        if isinstance(self.server, socketserver.BaseServer):  # websockets' shutdown closes
            self.server.server_close()

    def __enter__(self) -> int:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def threaded(server: Any, **options: Any) -> Threaded:
    """``with threaded(server) as port``: ``server`` served in a daemon thread until the
    block ends, whatever happens in it (``options``: ``poll_s``, ``stop_s``)."""
    return Threaded(server, **options)


def load_fake_server(file: str = "realtime_server"):
    """A fake server module of tests/fakes, loaded by path once (under ``duplexact_fake_<file>``:
    the fakes run as scripts too, importing their siblings by bare name)."""
    name = f"duplexact_fake_{file}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FAKES / f"{file}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # first: a fake's dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]
