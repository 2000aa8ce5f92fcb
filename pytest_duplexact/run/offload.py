"""A finished streaming trial's CPU-heavy work, out of the process that holds the live sessions
(so the loop that paces them stays punctual: docs/realtime.md, "Timing integrity").

While ``--duplexact-concurrency`` trials stream on the prefetcher's loop (prefetch.py), the
pytest thread of the same process scores the ones that finished. Writing the recording's
tracks (PCM-16 conversion, FLAC encoding) and the VAD (resampling, the network, the edge and
tone passes) are the CPU-heavy part of that: run there, they hold the GIL against the loop
that paces input and stamps output. ``ScoringWorker`` runs them in one worker process instead:

* a fresh interpreter (``python -c``: no ``fork`` of a parent with threads, and not
  multiprocessing's ``spawn``, which runs the parent's main script again), started with the
  first trial scored, at a lower priority (``NICE``) so that on a busy machine the live
  sessions win the cores, reused for the whole run; the VAD network is loaded once in it;
* one worker: pytest scores one test at a time, so at most one job is ever waiting;
* each job sends plain data (the Recording's float32 tracks, its small fields, a folder, a
  copy of an offloadable transcriber) and gets back the Timeline (or the speech spans as
  float pairs), made by the same functions, so the timeline and every file are
  byte-identical to in-process scoring (tests/run/test_offload.py);
* every wait has a deadline (``deadline_for``); a worker that misses it is killed, and one that
  dies is replaced for the next trial: either way the trial is a ``ScoringWorkerError``, an
  error, never a miss.

Stepped runs (and a streaming run with one trial in flight) have no live session while they
score, so they score in-process (harness.py ``Harness.analyse``). The rest of the
scoring stays in the pytest thread: the rules, the judges (network waits) and the small JSON
files. When the model gave no words, a transcriber that says it may run elsewhere
(``offloadable``: the offline faster-whisper one, its model then loaded once in the worker)
runs in the worker with the rest of the timeline; another (a remote one: network waits,
counters the report reads) runs in the pytest thread on the spans the worker sent back.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

import numpy as np

NICE = 10  # the worker's niceness above the run's (POSIX): the live sessions come first
DEADLINE_S = 120.0  # the least any job may take; plus DEADLINE_PER_AUDIO_S per audio second
# idle, the VAD and FLAC take ~0.01 s per audio second, the offline transcriber ~0.1 s (and
# at least 0.45 s a segment: docs/timeline.md); the margin is for a busy machine and the nice
DEADLINE_PER_AUDIO_S = 5.0


class ScoringWorkerError(RuntimeError):
    """The scoring worker died or missed its deadline: the trial is an error, never a miss."""


def deadline_for(seconds_of_audio: float) -> float:
    return DEADLINE_S + DEADLINE_PER_AUDIO_S * max(0.0, seconds_of_audio)


# The worker's whole command line: it reads the parent's sys.path first (so it imports the
# same package), then serves jobs. ``python -c``, not multiprocessing's spawn, which would run
# the parent's main script again in the child (a script without a __main__ guard: all again).
_BOOT = ("import sys; from multiprocessing.connection import Connection as C; "
         "jobs = C({r}, writable=False); sys.path[:] = jobs.recv(); "
         "from pytest_duplexact.run.offload import serve; "
         "serve(jobs, C({w}, readable=False), {nice})")


def serve(jobs: Connection, results: Connection, nice: int = NICE) -> None:
    """The worker's loop: (fn, args) in, ("ok", value) or ("error", exception, traceback)
    out, until the parent closes its end."""
    import signal

    # Ctrl-C reaches the whole process group: the run stops the worker, not the signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice and hasattr(os, "nice"):
        try:
            os.nice(nice)
        except OSError:  # not allowed here: same priority, still off the loop's process
            pass
    while True:
        try:
            fn, args = jobs.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", fn(*args))
        except Exception as exc:  # the job's own error, raised again in the parent
            reply = ("error", exc, traceback.format_exc())
        try:
            results.send(reply)
        except Exception as exc:  # an unpicklable value or exception: say what it was
            results.send(("error", RuntimeError(f"the scoring worker could not send its "
                                                f"answer back: {exc!r}"), repr(reply[1])))


def _write(recording, folder: str, instance_id: str | None, audio_format: str,
           cache_root: str | None):
    """The recording's files (recording_io.save_recording); the run's VAD cache, if any."""
    from ..data.recording_io import save_recording
    from ..remote.cache import RequestCache

    save_recording(recording, folder, instance_id=instance_id, audio_format=audio_format)
    return None if cache_root is None else RequestCache(cache_root)


def _write_and_detect(recording, folder: str, instance_id: str | None, audio_format: str,
                      params, cache_root: str | None) -> list[tuple[float, float]]:
    """In the worker: the files, then the VAD's speech spans of the output (the parent
    builds the timeline: its transcriber must run there)."""
    from ..listen import vad

    cache = _write(recording, folder, instance_id, audio_format, cache_root)
    cached = {} if cache is None else {"cache": cache}
    spans = vad.speech_spans(recording.output, recording.sample_rate, params, **cached)
    return [(sp.start, sp.end) for sp in spans]


def _write_and_segment(recording, folder: str, instance_id: str | None, audio_format: str,
                       params, cache_root: str | None, transcriber):
    """In the worker: the files, then the whole timeline (segmentation.build_timeline, with
    ``transcriber``, a copy of the parent's, when the model gave no words)."""
    from ..listen.segmentation import build_timeline

    cache = _write(recording, folder, instance_id, audio_format, cache_root)
    return build_timeline(recording, transcriber=transcriber, vad_params=params,
                          vad_cache=cache)


def runs_in_worker(transcriber) -> bool:
    """Whether the worker may run a copy of ``transcriber``: it says so (``offloadable``:
    plain data, local, no counters the report reads; the offline one does), or there is
    none."""
    return transcriber is None or getattr(transcriber, "offloadable", False) is True


def _float32(x: np.ndarray) -> np.ndarray:
    """Float tracks cross as float32 (half of float64's pickle): the PCM-16 writer, the VAD
    and the offline transcriber all convert to float32 first, so the result is the same."""
    x = np.asarray(x)
    return x.astype(np.float32, copy=False) if x.dtype.kind == "f" else x


class ScoringWorker:
    """One worker process for the CPU-heavy part of scoring (the module doc)."""

    def __init__(self, nice: int = NICE):
        self.nice = int(nice)  # added to the worker's niceness (benchmarks compare 0)
        self._proc: subprocess.Popen | None = None
        self._jobs: Connection | None = None
        self._results: Connection | None = None

    @staticmethod
    def available() -> bool:
        """Whether this platform can run it (the pipes it is given need POSIX)."""
        return os.name == "posix"

    def _start(self) -> None:
        to_child, jobs = os.pipe()  # (read end, write end)
        results, from_child = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT.format(r=to_child, w=from_child, nice=self.nice)],
                pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL)
        except BaseException:
            os.close(jobs)
            os.close(results)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)
        self._jobs = Connection(jobs, readable=False)
        self._results = Connection(results, writable=False)
        self._jobs.send(list(sys.path))

    def pids(self) -> list[int]:
        """The worker's process id (none before the first job or after a failure)."""
        return [] if self._proc is None else [self._proc.pid]

    def _discard(self) -> None:
        """Kill the worker (stuck or dead) and close its pipes: the next job starts a new one."""
        proc, self._proc = self._proc, None
        if proc is not None:  # first, so a send blocked on its pipe fails rather than waits
            proc.kill()
            proc.wait()
        for conn in (self._jobs, self._results):
            if conn is not None:
                conn.close()
        self._jobs = self._results = None

    def call(self, fn: Callable, *args, deadline: float, what: str) -> Any:
        """``fn(*args)`` in the worker (``fn`` a module-level function, ``args`` plain data),
        waited for at most ``deadline`` seconds. ``fn``'s own exception is raised here as it
        was raised there; a dead or late worker is a ScoringWorkerError naming ``what``."""
        if self._proc is not None and self._proc.poll() is not None:
            self._discard()  # it died while idle: no job lost, start a fresh one
        if self._proc is None:
            self._start()
        end = time.monotonic() + deadline
        try:
            self._send((fn, args), deadline)
            if not self._results.poll(max(0.0, end - time.monotonic())):
                self._discard()
                raise ScoringWorkerError(
                    f"the scoring worker took more than {deadline:.0f} s on {what} and was "
                    "stopped; the machine may be overloaded: lower --duplexact-concurrency")
            reply = self._results.recv()
        except (EOFError, OSError):  # its pipe closed: the worker is gone
            try:
                code = self._proc.wait(2.0)
            except subprocess.TimeoutExpired:  # its pipe broke, yet it runs: stopped below
                code = None
            self._discard()
            raise ScoringWorkerError(
                f"the scoring worker died on {what} (exit code {code}: out of memory, or "
                "killed); the next trial gets a new one") from None
        if reply[0] == "ok":
            return reply[1]
        exc = reply[1]
        exc.add_note(f"in the scoring worker (run/offload.py):\n{reply[2]}")
        raise exc

    def _send(self, job, deadline: float) -> None:
        """Send ``job``, within ``deadline``: a large job blocks until the worker reads it,
        and a worker that never starts reading must not hang the run. Raises OSError when
        its pipe is closed; returns when sent or when the deadline passed (the poll that
        follows then times out)."""
        failed: list[BaseException] = []

        def send():
            try:
                self._jobs.send(job)
            except BaseException as exc:  # reported by the waiting thread, not printed
                failed.append(exc)

        sender = threading.Thread(target=send, name="duplexact-scoring-send", daemon=True)
        sender.start()
        sender.join(deadline)
        if failed:
            raise OSError(f"the scoring worker's pipe: {failed[0]!r}")

    def _job(self, fn, recording, folder: Path, instance_id: str | None, *args):
        sent = dataclasses.replace(recording, input=_float32(recording.input),
                                   output=_float32(recording.output))
        return self.call(fn, sent, str(folder), instance_id, *args,
                         deadline=deadline_for(recording.duration),
                         what=f"instance {instance_id}")

    def write_and_detect(self, recording, folder: Path, *, instance_id: str | None,
                         audio_format: str, params, cache_root: Path | None) -> list:
        """``save_recording`` and ``vad.speech_spans`` of the recording's output, in the
        worker; the spans as ``data.timeline.Span``."""
        from ..data.timeline import Span

        pairs = self._job(_write_and_detect, recording, folder, instance_id, audio_format,
                          params, None if cache_root is None else str(cache_root))
        return [Span(a, b) for a, b in pairs]

    def write_and_segment(self, recording, folder: Path, *, instance_id: str | None,
                          audio_format: str, params, cache_root: Path | None, transcriber):
        """``save_recording`` and ``build_timeline`` in the worker (``runs_in_worker`` of
        ``transcriber``): the Timeline."""
        return self._job(_write_and_segment, recording, folder, instance_id, audio_format,
                         params, None if cache_root is None else str(cache_root), transcriber)

    def close(self, grace: float = 5.0) -> None:
        """At the end of the run: the idle worker exits when its pipe closes; one still busy
        after ``grace`` seconds (a job whose wait Ctrl-C interrupted) is killed."""
        proc = self._proc
        if proc is None:
            return
        self._jobs.close()
        self._jobs = None
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        self._discard()
