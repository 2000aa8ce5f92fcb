"""Driving a model bridge from a test: a lockstep client over a real WebSocket, and a bridge
server in a subprocess with the fakes of ``model_stubs`` importable in it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Sequence

import numpy as np
from websockets.sync.client import connect

import pytest_duplexact
from pytest_duplexact.bridges import wire

from .model_stubs import SITE

ROOT = Path(pytest_duplexact.__file__).resolve().parent.parent


@dataclass
class Steps:
    ready: wire.Ready
    audio: list[np.ndarray] = field(default_factory=list)  # one frame per step
    texts: list[tuple[int, str]] = field(default_factory=list)  # (step, piece)
    error: str = ""  # an ERROR message ended the trial


def run_steps(url: str, frames: Sequence[np.ndarray], query: str = "",
              timeout: float = 30.0) -> Steps:
    """One trial, stepped: each frame in, its TEXTs and one AUDIO out; then CLOSE both
    ways."""
    with connect(f"{url}/?{query}", max_size=None) as ws:
        kind, payload = wire.split(ws.recv(timeout=timeout))
        if kind == wire.ERROR:
            return Steps(wire.Ready("stepped", 1, 1, False), error=wire.utf8(payload))
        assert kind == wire.READY, kind
        out = Steps(wire.parse_ready(payload))
        for k, frame in enumerate(frames):
            ws.send(wire.audio(frame))
            while True:
                kind, payload = wire.split(ws.recv(timeout=timeout))
                if kind == wire.TEXT:
                    out.texts.append((k, wire.utf8(payload)))
                elif kind == wire.AUDIO:
                    out.audio.append(wire.pcm(payload))
                    break
                elif kind == wire.ERROR:
                    out.error = wire.utf8(payload)
                    return out
                else:
                    raise AssertionError(f"unexpected {wire.kind_name(kind)} in step {k}")
        ws.send(wire.frame(wire.CLOSE))
        # the server's CLOSE comes after the session's close(): the trial is over on its side
        assert wire.split(ws.recv(timeout=timeout))[0] == wire.CLOSE
    return out


def constant_frames(values: Sequence[float], size: int) -> list[np.ndarray]:
    """Frame k filled with values[k]: the fakes read a frame's code from its mean."""
    return [np.full(size, v, dtype=np.float32) for v in values]


@dataclass
class Served:
    url: str
    _log: IO[str]

    def log(self) -> str:
        """The server's log (stderr) so far."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()


@contextmanager
def bridge_process(module: str, *args: str, timeout: float = 60.0) -> Iterator[Served]:
    """``python -m pytest_duplexact.bridges.<module> --port 0 ARGS`` on 127.0.0.1 with the
    fakes' import names first on its path; yields its URL and log, stops it on exit."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT)]))
    log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe nobody drains
    proc = subprocess.Popen([sys.executable, "-m", f"pytest_duplexact.bridges.{module}",
                             "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, env=env)
    box: dict[str, str] = {}
    got = threading.Event()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("listening on "):
                box["url"] = line.split()[2]
                got.set()
        got.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not got.wait(timeout) or "url" not in box:
            proc.kill()
            proc.wait(10)
            log.seek(0)
            raise AssertionError(f"the {module} bridge did not start: {log.read()[-3000:]}")
        yield Served(box["url"], log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()
