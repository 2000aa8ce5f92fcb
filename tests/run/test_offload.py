"""The scoring worker (run/offload.py, issue 33): a finished streaming trial's files and VAD run
in another process, with the same bytes and the same outcome as in-process scoring, and a dead
or stuck worker is an error of that trial, never a miss nor a hung run.

Below the wall clock: the oracle (stepped) through ``Harness.run`` with a scoring worker set
by hand, as ``Harness.from_settings`` sets one for streaming trials in flight.
"""

from __future__ import annotations

import os
import pickle
import time

import numpy as np
import pytest

from pytest_duplexact.data import audio
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.recording import Recording
from pytest_duplexact.data.timeline import Word
from pytest_duplexact.listen.transcribe_offline import OfflineTranscriber
from pytest_duplexact.remote.cache import RequestCache
from pytest_duplexact.report.builder import Ran, base
from pytest_duplexact.rules import requires
from pytest_duplexact.run.harness import Harness, RunKnobs, timeline_to_dict
from pytest_duplexact.run.offload import NICE, ScoringWorker, ScoringWorkerError
from pytest_duplexact.run.selection import Selection, select
from pytest_duplexact.run.settings import RunSettings
from tests.run.test_batch_reports import instance_files
from tests.support.runs import CONDITIONS, assert_same_report


@pytest.fixture(scope="module")
def worker():
    w = ScoringWorker()
    yield w
    w.close()


@pytest.fixture(scope="module")
def selected():
    insts = select(load_dataset(bundled_root(), requires=requires).instances,
                   Selection(conditions=CONDITIONS, limit=1))
    assert {i.pipeline.value for i in insts} == {"direct", "simulator", "barge_in"}
    return sorted(insts, key=lambda i: (i.action, i.id))


def run(run_dir, insts, worker=None, audio_format="flac"):
    settings = RunSettings(model="oracle")
    h = Harness.from_settings(settings, run_dir, RunKnobs(audio_format=audio_format))
    assert h.scoring_worker is None  # stepped: scored in-process unless given one
    h.scoring_worker = worker
    return base(Ran([h.run(i) for i in insts], settings, "oracle")).to_json()


@pytest.mark.parametrize("audio_format", ["flac", "wav"])
def test_offloaded_scoring_gives_the_same_files_and_report(selected, worker, tmp_path,
                                                           monkeypatch, audio_format):
    here = run(tmp_path / "in-process", selected, audio_format=audio_format)
    assert here["totals"] == {"instances": len(selected), "errors": 0}

    # with a worker, this process neither runs the VAD's network nor writes an audio track
    def not_here(*a, **kw):
        raise AssertionError("CPU-heavy scoring ran in the process holding the sessions")

    monkeypatch.setattr("pytest_duplexact.listen.vad.speech_probabilities", not_here)
    monkeypatch.setattr("pytest_duplexact.data.audio.write", not_here)
    there = run(tmp_path / "worker", selected, worker, audio_format=audio_format)
    assert_same_report(there, here)
    files = instance_files(tmp_path / "worker")
    assert files == instance_files(tmp_path / "in-process")
    assert sum(name.endswith(f"output.{audio_format}") for name in files) == len(selected)
    # the worker used the run's VAD cache: scoring the same audio again reads it
    assert any((tmp_path / "worker" / "cache").rglob("*.json"))


class WordsPerSecond:
    """A local transcriber as the offline one: plain data, so it may run in the worker."""

    name = "words-per-second"
    offloadable = True

    def transcribe(self, samples, sample_rate):
        n = max(1, int(len(samples) / sample_rate))
        return tuple(Word(k, k + 0.5, f"w{k}") for k in range(n))


class RemoteWords(WordsPerSecond):
    offloadable = False  # a remote one (counters the report reads): stays in this process


def speech_without_words() -> Recording:
    reply = audio.read(next(bundled_root().glob("audio/*.reference.flac")))
    out = np.concatenate([np.zeros(8000, np.float32), reply, np.zeros(8000, np.float32)])
    return Recording(input=np.zeros(len(out), np.float32), output=out)


@pytest.mark.parametrize("kind", [WordsPerSecond, RemoteWords])
def test_a_transcriber_runs_where_it_may_with_the_same_timeline(worker, tmp_path, monkeypatch,
                                                                kind):
    rec = speech_without_words()
    here = Harness(model=None, run_dir=tmp_path, transcriber=kind())
    expected = timeline_to_dict(here.analyse(rec, tmp_path / "here", "x"))
    assert expected["segments"] and all(s["text"] for s in expected["segments"])
    ran = []
    real = kind.transcribe

    def in_this_process(self, samples, sample_rate):
        ran.append(len(samples))
        return real(self, samples, sample_rate)

    monkeypatch.setattr(kind, "transcribe", in_this_process)  # this process's copy only
    there = Harness(model=None, run_dir=tmp_path, transcriber=kind(), scoring_worker=worker)
    assert timeline_to_dict(there.analyse(rec, tmp_path / "there", "x")) == expected
    assert bool(ran) is (kind is RemoteWords)  # the offloadable one ran in the worker
    assert instance_files_of(tmp_path / "there") == instance_files_of(tmp_path / "here")


def instance_files_of(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_offline_transcriber_crosses_to_the_worker_as_plain_data(tmp_path):
    t = OfflineTranscriber(lazy=True, cache=RequestCache(tmp_path), beam_size=2)
    copy = pickle.loads(pickle.dumps(t))
    assert (copy.name, copy.beam_size, copy.cache.root) == (t.name, 2, tmp_path)


def die_in_worker(*args):  # stands in for the worker's job, by reference (pickled by name)
    os._exit(7)


def test_a_worker_dying_on_a_trial_makes_that_trial_an_error(selected, worker, tmp_path,
                                                             monkeypatch):
    h = Harness.from_settings(RunSettings(model="oracle"), tmp_path, RunKnobs())
    h.scoring_worker = worker
    for job in ("_write_and_detect", "_write_and_segment"):
        monkeypatch.setattr(f"pytest_duplexact.run.offload.{job}", die_in_worker)
    inst = selected[0]
    with pytest.raises(ScoringWorkerError) as info:
        h.run(inst)
    outcome = h.error_outcome(inst, info.value)
    assert outcome.immediate is None and outcome.subsequent is None  # never a miss
    assert outcome.error.startswith(f"ScoringWorkerError: the scoring worker died on "
                                    f"instance {inst.id} (exit code 7")
    monkeypatch.undo()
    assert h.run(inst).error is None  # the next trial gets a new worker


class Streams:  # a streaming model as the harness sees one (models/base.py StreamingModel)
    input_sample_rate = output_sample_rate = 16_000

    async def connect(self, info):
        raise AssertionError("not run here")


@pytest.mark.parametrize("concurrency, offloaded", [(1, False), (4, True)])
def test_a_worker_only_while_streaming_trials_are_in_flight(tmp_path, concurrency, offloaded):
    h = Harness.from_settings(RunSettings(model="x"), tmp_path, RunKnobs(concurrency=concurrency),
                              model=Streams())
    try:
        assert (h.scoring_worker is not None) is offloaded
        assert h.scoring_worker is None or h.scoring_worker.pids() == []  # started lazily
    finally:
        h.close()


def test_a_worker_that_dies_is_that_trials_error_and_is_replaced(worker):
    assert worker.call(abs, -2, deadline=60, what="a warm-up") == 2
    with pytest.raises(ScoringWorkerError, match="died on instance x"):
        worker.call(os._exit, 3, deadline=60, what="instance x")
    assert worker.call(abs, -3, deadline=60, what="the next trial") == 3


def test_a_worker_that_died_idle_costs_no_trial(worker):
    worker.call(abs, 0, deadline=60, what="a warm-up")
    (pid,) = worker.pids()
    os.kill(pid, 9)
    worker._proc.wait(10)
    assert worker.call(abs, -4, deadline=60, what="instance y") == 4
    assert worker.pids() != [pid]


def test_a_stuck_worker_is_stopped_at_its_deadline(worker):
    worker.call(abs, 0, deadline=60, what="a warm-up")
    proc = worker._proc
    with pytest.raises(ScoringWorkerError, match="more than 0 s on instance z"):
        worker.call(time.sleep, 60, deadline=0.2, what="instance z")
    assert worker.pids() == [] and proc.returncode is not None  # killed, and reaped
    assert worker.call(abs, -5, deadline=60, what="the next trial") == 5


def test_the_worker_yields_the_cores_to_the_live_sessions(worker):
    assert worker.call(os.nice, 0, deadline=60, what="its niceness") == min(19, os.nice(0) + NICE)


def test_the_job_error_is_raised_as_it_was_raised_there(worker):
    with pytest.raises(ZeroDivisionError) as info:
        worker.call(divmod, 1, 0, deadline=60, what="instance w")
    assert "in the scoring worker" in "".join(info.value.__notes__)
    assert worker.call(abs, -6, deadline=60, what="the next trial") == 6


def test_a_dead_workers_trial_keeps_its_recording_and_a_resume_rescores_it(
        selected, worker, tmp_path, monkeypatch):
    """The streamed (maybe billed) recording is kept when the worker dies on it, the error
    says so, the journal marks it to be scored again, and scoring it again calls no model:
    the same outcome as a trial scored at once."""
    from pytest_duplexact.data.recording_io import load_recording
    from pytest_duplexact.run import journal

    settings = RunSettings(model="oracle")
    h = Harness.from_settings(settings, tmp_path / "run", RunKnobs())
    h.scoring_worker = worker
    for job in ("_write_and_detect", "_write_and_segment"):
        monkeypatch.setattr(f"pytest_duplexact.run.offload.{job}", die_in_worker)
    inst = selected[0]
    recorded = []
    real_record = h.record
    monkeypatch.setattr(h, "record", lambda i: recorded.append(i) or real_record(i))
    with pytest.raises(ScoringWorkerError) as info:
        h.run(inst)
    assert "its recording is kept in instances/" in str(info.value)
    assert "--duplexact-resume scores it again without calling the model" in str(info.value)
    h.error_outcome(inst, info.value)
    folder = h.instance_dir(inst)
    kept = load_recording(folder)
    assert len(kept.output) > 0
    entry = journal.read_entry(folder, inst.id, settings.fingerprint(), 100.0)
    assert entry.status is journal.Status.RESCORE, entry
    monkeypatch.undo()
    again = h.rescore(inst)
    assert len(recorded) == 1  # the model ran once, for the first attempt only
    assert again.error is None and again.immediate is not None
    fresh = Harness.from_settings(settings, tmp_path / "fresh", RunKnobs()).run(inst)
    assert again.immediate == fresh.immediate and again.timing == fresh.timing
    assert not (folder / "error.txt").exists()
    assert journal.read_entry(folder, inst.id, settings.fingerprint(),
                              100.0).status is journal.Status.FINISHED
