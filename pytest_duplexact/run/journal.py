"""The run directory as a journal (docs/runs.md): which instances of a run are finished and
may be reused by ``--duplexact-resume``, and which must run again.

The harness writes an instance's files one at a time, each to a temporary name renamed into
place, and ``outcome.json`` last, stamped with the run's fingerprint. An instance counts as
finished only when its outcome carries the current fingerprint and every file a later step
reads (recording, timeline) is there and parses; anything else is run again, never trusted.
Which settings an outcome depends on, and so its fingerprint: settings.RunSettings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..data.results import (
    InstanceOutcome,
    Verdict,
    finite_number,
    outcome_problem,
    over_tolerance,
    worst_lag_ms,
)
from .rundir import (  # noqa: F401 (the run files' names, read as journal.OUTCOME_FILE too)
    ERROR_FILE,
    FINGERPRINT_KEY,
    INSTANCES_DIR,
    OUTCOME_FILE,
    TIMELINE_FILE,
    USAGE_KEY,
    RunDir,
    read_json_object,
)


class Status(str, Enum):
    FINISHED = "finished"  # reusable as is
    NOT_FINISHED = "not_finished"  # no outcome.json: never run, or stopped mid-instance
    DAMAGED = "damaged"  # an outcome is there but a file it relies on is missing or broken
    STALE = "stale"  # finished under other settings (fingerprint differs)
    LATE = "late"  # its trial was later than this run's timing tolerance: never scored
    ERROR = "error"  # ended in a harness/model error: retried
    JUDGE_ERROR = "judge_error"  # a judge gave no usable answer: retried
    # the scoring worker died on it, its recording kept: scored again from that recording
    RESCORE = "rescore"


@dataclass(frozen=True)
class Entry:
    status: Status
    outcome: dict | None = None  # the stored outcome (FINISHED only)
    why: str = ""


def _check_recording(folder: Path, instance_id: str) -> None:
    """recording.json names this instance and both tracks' headers match its sample counts
    (headers only: a file renamed into place is whole, this catches foreign or swapped ones)."""
    import soundfile as sf

    from ..data.recording_io import RECORDING_FILE, track_file

    meta = read_json_object(folder / RECORDING_FILE)
    if meta.get("instance") != instance_id:
        raise ValueError(f"{RECORDING_FILE} is for instance {meta.get('instance')!r}")
    for track in ("input", "output"):
        path, key = track_file(folder, track), f"{track}_samples"
        name = path.name
        info = sf.info(str(path))
        if info.frames != meta.get(key) or info.samplerate != meta.get("sample_rate"):
            raise ValueError(f"{name} has {info.frames} samples at {info.samplerate} Hz; "
                             f"{RECORDING_FILE} says {meta.get(key)} at "
                             f"{meta.get('sample_rate')} Hz")


WORKER_ERROR = "ScoringWorkerError"  # offload.ScoringWorkerError's name, as outcomes say it


def _kept_recording(folder: Path, instance_id: str) -> bool:
    """The whole recording of a trial whose scoring worker died (harness.Harness._kept)."""
    try:
        _check_recording(folder, instance_id)
    except Exception:  # missing, unreadable or inconsistent: run the trial again
        return False
    return True


def usage_problem(usage) -> str | None:
    """A stored usage delta or total: {service: {counter: number, model: str}} (usage.py),
    each number finite and below ``MAX_COUNT`` (larger ones only overflow the sums)."""
    if usage is None:
        return None
    if not isinstance(usage, dict) or not all(isinstance(v, dict) for v in usage.values()):
        return f"'{USAGE_KEY}' is not an object of objects"
    for label, vals in usage.items():
        for k, v in vals.items():
            if not (isinstance(v, (str, type(None)))
                    or (finite_number(v) and abs(v) < MAX_COUNT)):
                return f"'{USAGE_KEY}.{label}.{k}' is {_short(v)}"
    return None


MAX_COUNT = 1e15  # tokens, seconds or calls no run reaches


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_entry(folder: Path, instance_id: str, expected_fingerprint: str,
               tolerance_ms: float | None = None) -> Entry:
    """What the journal says about one instance folder. ``tolerance_ms``: the resuming
    run's timing tolerance (ms; None: off); a trial over it is run again, whatever
    tolerance it ran under (the timing tolerance is no setting, so it is in no
    fingerprint)."""
    path = folder / OUTCOME_FILE
    if not path.is_file():
        return Entry(Status.NOT_FINISHED, why=f"no {OUTCOME_FILE}")
    try:
        d = read_json_object(path)
        problem = outcome_problem(d) or usage_problem(d.get(USAGE_KEY))
        if problem:
            raise ValueError(problem)
        outcome = InstanceOutcome.from_dict(d)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return Entry(Status.DAMAGED, why=f"{OUTCOME_FILE}: {e}")
    if outcome.id != instance_id:
        return Entry(Status.DAMAGED, why=f"{OUTCOME_FILE} is for instance {outcome.id!r}")
    if d.get(FINGERPRINT_KEY) != expected_fingerprint:
        return Entry(Status.STALE, why="finished under other settings")
    if outcome.error is not None:
        if outcome.error.startswith(f"{WORKER_ERROR}: ") and _kept_recording(folder, instance_id):
            return Entry(Status.RESCORE, why=outcome.error)
        return Entry(Status.ERROR, why=outcome.error)
    if over_tolerance(outcome.clock, tolerance_ms):
        return Entry(Status.LATE, why=f"its trial ran {worst_lag_ms(outcome.clock):.0f} ms "
                                      f"late, over the tolerance ({tolerance_ms:g} ms)")
    stages = (outcome.immediate, outcome.subsequent)
    if any(s is not None and s.verdict is Verdict.JUDGE_ERROR for s in stages):
        return Entry(Status.JUDGE_ERROR, why="a judge gave no usable answer")
    try:
        _check_recording(folder, instance_id)
        read_json_object(folder / TIMELINE_FILE)
    except Exception as e:  # missing, unreadable or inconsistent: the entry is not trusted
        return Entry(Status.DAMAGED, why=f"{type(e).__name__}: {e}")
    d = {k: v for k, v in d.items() if k != FINGERPRINT_KEY}  # the outcome (+ usage)
    return Entry(Status.FINISHED, d)


@dataclass
class Scan:
    """The journal of a run directory, for the instances a resumed run selected."""

    entries: dict[str, Entry] = field(default_factory=dict)  # instance id -> entry

    @property
    def finished(self) -> dict[str, dict]:
        return {i: e.outcome for i, e in self.entries.items() if e.status is Status.FINISHED}

    @property
    def rescore(self) -> set[str]:
        """Instances scored again from their kept recording, without calling the model."""
        return {i for i, e in self.entries.items() if e.status is Status.RESCORE}

    def count(self, status: Status) -> int:
        return sum(e.status is status for e in self.entries.values())

    def summary(self) -> str:
        """``40 of 72 selected instance(s) reused; 32 to run (30 not finished, 2 retried ...)``"""
        n, done = len(self.entries), self.count(Status.FINISHED)
        parts = [f"{self.count(s)} {label}" for s, label in (
            (Status.NOT_FINISHED, "not finished"),
            (Status.ERROR, "harness error(s) retried"),
            (Status.JUDGE_ERROR, "judge error(s) retried"),
            (Status.DAMAGED, "damaged entry(ies) re-run"),
            (Status.STALE, "scored under other settings, re-run"),
            (Status.LATE, "over this run's timing tolerance, re-run"),
            (Status.RESCORE, "scored again from the recording kept when the scoring worker "
                             "died"),
        ) if self.count(s)]
        rest = f"; {n - done} to run ({', '.join(parts)})" if n > done else ""
        return f"{done} of {n} selected instance(s) finished and reused{rest}"


def scan(run_dir: Path, instance_ids, expected_fingerprint: str,
         tolerance_ms: float | None) -> Scan:
    """``tolerance_ms``: the resuming run's timing tolerance (read_entry)."""
    run = RunDir(run_dir)
    return Scan({iid: read_entry(run.instance(iid), iid, expected_fingerprint, tolerance_ms)
                 for iid in sorted(instance_ids)})
