"""Driving a model bridge from a test: a lockstep client over a real WebSocket, and a bridge
server in a subprocess with the fakes of ``model_stubs`` importable in it."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Sequence

import numpy as np
from websockets.sync.client import connect

import pytest_duplexact
from pytest_duplexact.bridges import wire
from tests.bridges.model_stubs import SITE
from tests.support.servers import LISTENING, Child, ChildFailed

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
            return Steps(wire.Ready("stepped", wire.MIN_RATE, 1, False), error=wire.utf8(payload))
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
def bridge_process(module: str, *args: str, timeout: float = 60.0,
                   python: str = sys.executable,
                   path: Sequence[str | Path] = (SITE,)) -> Iterator[Served]:
    """``python -m pytest_duplexact.bridges.<module> --port 0 ARGS`` on 127.0.0.1 with
    ``path`` (the fakes' import names) first on its path; yields its URL and log, stops it on
    exit. ``python``: the interpreter (tests/upstream: the model's own environment)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, path), str(ROOT)]),
               PYTHONDONTWRITEBYTECODE="1")  # nothing written into an author's checkout
    with serve_command([python, "-m", f"pytest_duplexact.bridges.{module}",
                        "--host", "127.0.0.1", "--port", "0", *args], env,
                       what=f"the {module} bridge", timeout=timeout) as served:
        yield served


@contextmanager
def serve_command(argv: Sequence[str], env: dict[str, str], *, what: str,
                  timeout: float = 60.0) -> Iterator[Served]:
    """A bridge's command line in a process of its own (from the repository's root): waits
    at most ``timeout`` for its ``listening on URL`` line, yields its URL and log (stderr),
    stops it on exit."""
    with tempfile.TemporaryFile(mode="w+") as log:  # a file, not a pipe nobody drains
        try:
            server = Child(list(argv), ready=LISTENING, stops_on_stdin=False, stop_s=10,
                           stderr=log, cwd=ROOT, env=env, start_s=timeout)
        except ChildFailed as e:
            log.seek(0)
            raise AssertionError(f"{what} did not start ({e}): {log.read()[-3000:]}") from None
        with server:
            yield Served(server.url, log)


def client_trial(url: str, instance, model: str = "bridge", **options):
    """One Direct Replay trial of ``instance`` (1 s of observation: short) through the
    plugin's bridge client (``--duplexact-model=bridge --duplexact-model-option=url=URL``, or
    the model's name) and its stepped session: the Recording."""
    from pytest_duplexact.models import resolve_model
    from pytest_duplexact.models.contract import SessionInfo
    from pytest_duplexact.pipelines import DirectReplay, open_duplex

    stepped = resolve_model(model, url=url, **options)

    async def go():
        duplex = await open_duplex(stepped, SessionInfo(instance, seed=0))
        return await DirectReplay(observation_s=1.0).run(duplex, instance)

    return asyncio.run(go())


def dc_instance(tmp: Path, level: float = 0.1):
    """take_turn.immediate with a user "clip" that is a constant ``level`` from 1 s to 2 s: the
    fakes read a frame's code from its mean, so their echo of it is visible in the output."""
    from tests.pipelines.helpers import cat, gap
    from tests.support.builders import make_instance

    user = cat(gap(1.0), np.full(16_000, level, dtype=np.float32), gap(0.5))
    return make_instance(tmp, "take_turn", "immediate", {"user": user},
                         {"user_start": 1.0, "user_end": 2.0})


def frame_means(samples: np.ndarray, frame: int) -> np.ndarray:
    n = samples.size // frame
    return samples[:n * frame].reshape(n, frame).mean(axis=1)


def assert_echo(rec, frame_s: float, delay: int, atol: float = 0.005) -> None:
    """The recording's output frame j (16 kHz) carries the mean of its input frame
    j - ``delay``, as the fakes' echo does through the bridge at its own rate and frame."""
    n = round(frame_s * 16_000)
    heard, said = frame_means(rec.output, n), frame_means(rec.input, n)
    m = min(heard.size, said.size + delay)
    assert said.max() > 0.05, "the user clip did not reach the model"
    np.testing.assert_allclose(heard[delay:m], said[:m - delay], atol=atol)
    np.testing.assert_allclose(heard[:delay], 0.0, atol=atol)
