"""Our model bridges in front of the authors' own model code. For every bridge module (moshi,
FLM-Audio, Voila, BayLing-Duplex): the start command docs/models.md prints, checked against the
one ``duplexact models`` prints. For tests/upstream/test_moshi.py and test_flm_audio.py: that
command run (its placeholders filled in, CPU flags added) in the authors' environment and
driven by the plugin's own bridge client and pipelines, as a benchmark run drives it."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from tests.bridges.model_support import ROOT, Served, serve_command
from tests.upstream.support import docs_commands


def printed_command(module: str) -> list[str]:
    """The start command of ``pytest_duplexact.bridges.<module>`` docs/models.md prints first
    (``support.docs_command``); every one it prints for that module is checked to have the
    flags ``duplexact models`` prints, so the one the harness runs stands for them all."""
    printed = docs_commands(f"python -m pytest_duplexact.bridges.{module}")
    for argv in printed:
        check_listed(argv)
    return printed[0]


def check_listed(argv: Sequence[str]) -> None:
    """``duplexact models`` (models/paper_models.py) prints a start command for the same
    bridge with the same flags as the docs' (``--host`` aside: the docs' may listen on
    loopback only), so the harness running the one checks the other too."""
    from pytest_duplexact.models.catalogue.paper_models import ROUTES

    listed = [shlex.split(r.start) for routes in ROUTES.values() for r in routes
              if r.start.startswith(" ".join(argv[:3]) + " ")]
    assert listed, f"duplexact models prints no command for {argv[2]}"

    def flags(args):
        return {a for a in args if a.startswith("--")} - {"--host"}

    assert flags(listed[0]) == flags(argv), (listed[0], argv)


def filled(argv: Sequence[str], python: str, values: dict[str, str],
           extra: Sequence[str] = ()) -> list[str]:
    """The printed ``argv`` run by ``python`` with each ``--flag``'s placeholder value replaced
    by ``values[flag]`` (a flag the command does not print is an error: the docs changed) and
    ``extra`` arguments appended (what only this machine needs: CPU, the checkout)."""
    out, missing = [python, *argv[1:]], set(values)
    for k, arg in enumerate(out[:-1]):
        if arg in values:
            out[k + 1] = values[arg]
            missing.discard(arg)
    assert not missing, f"the printed command {' '.join(argv)!r} lacks {sorted(missing)}"
    return out + list(extra)


def started(argv: Sequence[str], pythonpath: Sequence[Path], *, what: str,
            env: dict[str, str] | None = None, timeout: float = 600.0):
    """The bridge process (``serve_command``) with ``pythonpath`` first, then this checkout
    (the kit imports only the standard library, numpy and websockets)."""
    full = dict(os.environ, **(env or {}))
    full["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(ROOT)])
    return serve_command(argv, full, what=what, timeout=timeout)


def warmup_seconds(served: Served) -> float:
    """How long the bridge's warm-up took, from the kit's log line."""
    found = re.search(r"warmed up in ([0-9.]+) s", served.log())
    assert found, f"no warm-up in the bridge's log: {served.log()[-2000:]}"
    return float(found.group(1))


@dataclass
class Measured:
    """What the harness measured through the client (the columns of record_row)."""

    onsets_ms: list[float] = field(default_factory=list)  # first audio vs the model's delay
    audio: bool = True
    text: bool = False

    def row(self) -> dict:
        errors = sorted(abs(x) for x in self.onsets_ms)
        return {"audio": self.audio, "text": self.text,
                "onset_err_ms_median": round(float(np.median(errors)), 1),
                "onset_err_ms_max": round(errors[-1], 1)}


def first_audio_s_of(samples: np.ndarray, rate: int = 16_000) -> float | None:
    """The time of the first sample above 1% of the output's peak (None: silent)."""
    peak = float(np.abs(samples).max()) if samples.size else 0.0
    if peak == 0.0:
        return None
    return int(np.argmax(np.abs(samples) > 0.01 * peak)) / rate


def run_trials(model, instances) -> list:
    """Each instance through the pipeline the benchmark gives it (``run_instance``), one
    after the other: the Recordings."""
    from pytest_duplexact.pipelines import run_instance

    return [asyncio.run(run_instance(inst, model)) for inst in instances]


def at_once(make_model, instances) -> list:
    """The instances' trials started together, each by its own client (``make_model()``, in
    a thread of its own, as two pytest-xdist workers would; a server with ``max_sessions`` 1
    queues the others before their READY): the Recordings, or the exception a trial
    raised."""
    out: list = [None] * len(instances)

    def one(k: int) -> None:
        try:
            out[k] = run_trials(make_model(), [instances[k]])[0]
        except Exception as e:  # reported by the caller
            out[k] = e

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return out


TRIAL_LINE = r" trial \S+ from .*, [1-9][0-9]* steps, "


def trial_lines(served: Served) -> list[str]:
    """The kit's one log line per trial (the client's probes, which read READY and close
    without a step, left out)."""
    return re.findall(f".*{TRIAL_LINE}.*", served.log())


def log_when(served: Served, pattern: str, count: int, deadline_s: float = 30.0) -> str:
    """The bridge's log once ``pattern`` is in it ``count`` times, or when ``deadline_s`` has
    passed: the kit logs a trial after its socket closed, so after the client returned."""
    end = time.monotonic() + deadline_s
    while len(re.findall(pattern, log := served.log())) < count and time.monotonic() < end:
        time.sleep(0.1)
    return log


def instances(tmp: Path) -> list:
    """A take-turn (Direct Replay), a stop cue played over the model's speech (Simulator
    Replay) and a barge-in (its own pipeline), hand-made (tests/pipelines/helpers.py)."""
    from pytest_duplexact.data.taxonomy import CONDITIONS
    from tests.pipelines.helpers import instance_for

    conditions = {(c.action, c.id): c for c in CONDITIONS}
    return [instance_for(tmp / f"i{k}", conditions[key]) for k, key in
            enumerate([("take_turn", "immediate"), ("stop", "direct_interruption"),
                       ("interrupt", "help")])]


def drive(served: Served, client, talk: list, first_audio_s: float) -> Measured:
    """Every instance through ``client()``'s pipelines, then the first twice at once from
    two clients; checks what holds for any model behind a kit bridge: audio in every trial,
    first heard within 10 ms of ``first_audio_s`` (where the model's delay puts it), the
    queued trial served too and identical (seeded, nothing left over from the trial before),
    each trial ended by CLOSE both ways. Returns what was measured."""
    recs = run_trials(client(), talk)
    both = at_once(client, talk[:1] * 2)  # max_sessions 1: the second waits its turn
    log_when(served, TRIAL_LINE, len(talk) + 2)
    log = trial_lines(served)
    m = Measured()
    for rec in recs:
        onset = first_audio_s_of(rec.output)
        assert onset is not None, "the model's audio never reached the recording"
        m.onsets_ms.append(1000 * (onset - first_audio_s))
        m.text = m.text or bool(rec.transcript)
    assert all(not isinstance(r, Exception) for r in both), both
    assert all(np.array_equal(r.output, recs[0].output) for r in both)
    assert len(log) == len(talk) + 2 and all(": ok," in line for line in log), log
    assert max(abs(x) for x in m.onsets_ms) <= 10.0, m.onsets_ms
    return m
