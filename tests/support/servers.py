"""Servers for the tests and benchmarks, each with a guaranteed stop:

- ``child(script, *args)``: a fake (tests/fakes/*.py, or any script that prints ``PORT <n>``
  and serves until its stdin closes) in its own process, so its work does not share the
  test's event loop. The port is read with a deadline; stopping closes its stdin (the fakes
  then write their ground truth), and terminates, then kills, one that does not end. A
  bridge (``ready=LISTENING, stops_on_stdin=False``) is stopped with SIGTERM instead.
- ``threaded(server)``: a ``serve_forever`` server (``socketserver``, ``http.server``,
  ``websockets.sync``) bound to 127.0.0.1:0, served by a daemon thread and shut down on exit.
- ``load_fake_server(name)``: a fake's module, loaded by path once (the fakes also run as
  scripts, importing their siblings by bare name).
- ``ws_collector()``: a websockets server on 127.0.0.1 that keeps every message, and a client
  connected to it, in the test's own event loop."""

from __future__ import annotations

import contextlib
import importlib.util
import queue
import re
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parents[1] / "fakes"
# the fakes' first line (fake_ws.serve_until_stdin_closes)
PORT = re.compile(r"^PORT (?P<port>\d+)$")
# a bridge's (bridges/kit.py): ``listening on ws://127.0.0.1:8998 (model ...)``
LISTENING = re.compile(r"listening on (?P<url>wss?://\S+?:(?P<port>\d+)\S*)")


class Child:
    """A server in its own process, ready once it prints a line ``ready`` matches (``port``:
    its ``port`` group; ``url``: its ``url`` group, if any). A ``with`` block (or ``stop()``,
    which may come earlier) ends it: by closing its stdin (``stops_on_stdin``, the fakes), or
    by SIGTERM (a bridge). Its stdout is read to the end, so a chatty child never blocks."""

    def __init__(self, argv: list[str], *, ready: re.Pattern = PORT, stops_on_stdin: bool = True,
                 env: dict | None = None, cwd: Path | None = None, stderr: Any = None,
                 start_s: float = 60.0, stop_s: float = 30.0):
        self.argv, self.stops_on_stdin, self.stop_s = argv, stops_on_stdin, stop_s
        self.name = Path(argv[1]).name if len(argv) > 1 and argv[1] != "-c" else argv[0]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=env, cwd=cwd)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True, name="child-stdout")
        self._reader.start()
        self.line, self.match = self._ready(ready, start_s)
        groups = self.match.groupdict()
        self.port = int(groups["port"]) if groups.get("port") else None
        self.url = groups.get("url")

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _ready(self, ready: re.Pattern, deadline_s: float) -> tuple[str, re.Match]:
        """The first line ``ready`` matches, within ``deadline_s``: a child that prints none
        (hung in an import, crashed) is ended and reported with what it printed."""
        end, seen = time.monotonic() + deadline_s, []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                self._fail(f"printed no ready line within {deadline_s:g} s", seen)
            if line is None:
                self._fail("closed its output before it was ready", seen)
            seen.append(line)
            m = ready.search(line)
            if m:
                return line, m

    def _fail(self, what: str, seen: list[str]):
        self._end()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self._close()
        said = "".join(seen)[-2000:]
        raise ChildFailed(f"{self.name} {what}; its output: {said!r}"
                          f"{' (stderr below)' if err else ''}\n{err[-3000:]}", err)

    def stop(self) -> int:
        """Close its stdin (or terminate it) and wait ``stop_s`` at most; then terminate, then
        kill, one still running (a fake that did not stop when its stdin closed says so).
        Returns its exit status; a second call only returns it."""
        if self.proc.poll() is None:
            if self.stops_on_stdin:
                self.proc.stdin.close()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(timeout=self.stop_s)
            except subprocess.TimeoutExpired:
                if not self.stops_on_stdin:  # a stalled bridge: expected, killed
                    self.proc.kill()
                    self.proc.wait(timeout=10)
                else:
                    self._end()
                    self._close()
                    raise ChildFailed(f"{self.name} did not stop within {self.stop_s:g} s of "
                                      f"its stdin closing (killed)", "") from None
        self._close()
        return self.proc.returncode

    def _end(self) -> None:
        """Terminate, then kill."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def _close(self) -> None:
        """The pipes, once the reader has seen the end of stdout (the child has ended)."""
        self._reader.join(10)
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


def child(script: Path | str, *args: Any, python: str = sys.executable, **options: Any) -> Child:
    """``python script *args`` started and ready (``options``: those of ``Child``). A bare
    name is a fake of tests/fakes, which prints ``PORT <n>`` and stops when its stdin
    closes."""
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


@contextlib.asynccontextmanager
async def ws_collector(**connect_options: Any):
    """Yields (a websockets client connection, the list of messages the server received):
    the list is complete once the block is left (the client closed, the server had read
    everything before the close frame)."""
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    got: list = []

    async def handler(ws):
        async for message in ws:
            got.append(message)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", **connect_options) as ws:
            yield ws, got
