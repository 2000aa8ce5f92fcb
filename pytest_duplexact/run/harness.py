"""Runs one instance end to end: model -> pipeline -> recording -> timeline -> scores.

Every stage's product is written to the run directory as it is known (recording first, the
outcome last, each write-then-rename), so a failure can be listened to and re-scored, and a
killed run keeps every finished instance.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.annotations import Instance
from ..data.results import ImmediateResult, InstanceOutcome, Verdict
from ..data.taxonomy import TIMING_TOLERANCE_S
from ..data.timeline import Segment, Timeline
from ..listen.diagnosis import no_speech_diagnosis
from ..models.adapter import traits
from ..models.contract import SessionInfo
from ..pipelines.watchdog import DEFAULT_TIMEOUT, run_watched
from ..rules import scoring, trial_latency
from .rundir import RunDir
from .settings import SettingsError

# A wall-clock trial over the timing tolerance is run again at most this many times (at a
# lower concurrency), then reported as timing unreliable (pipelines/clock.py)
TIMING_RERUNS = 2


def user_spans(instance: Instance, tl: Timeline) -> list[list[float]]:
    """Where user-side speech sits on the timeline (for the failure lanes): the user clip for
    Direct Replay and barge-in (it starts at t = 0), the lead-in and the cue for simulator."""
    if "user" in instance.clips:
        a = instance.annotations
        end = a.user_end if tl.user_sent_until is None else min(a.user_end, tl.user_sent_until)
        return [[a.user_start, end]]
    spans = []
    lead = instance.clips.get("lead_in")
    if lead is not None and lead.transcript:
        spans.append([lead.transcript[0].start, lead.transcript[-1].end])
    if tl.cue is not None:
        spans.append([tl.cue.start, tl.cue.end])
    return spans


def timeline_to_dict(tl: Timeline, instance: Instance | None = None) -> dict:
    return {
        "user": user_spans(instance, tl) if instance is not None else [],
        "duration": tl.duration,
        "segments": [{"start": s.start, "end": s.end, "text": s.text} for s in tl.segments],
        "speech": [[s.start, s.end] for s in tl.speech_spans],
        "cue": None if tl.cue is None else {"start": tl.cue.start, "end": tl.cue.end,
                                            "forced": tl.cue.forced},
        "user_sent_until": tl.user_sent_until,
        "events": [list(e) for e in tl.events],
        # native words that fell in no speech segment: a model/transcript mismatch to inspect
        "unaligned": [[w.start, w.end, w.text] for w in tl.unaligned],
    }


def _channel_of(settings):
    """The run's channel (settings.channel is a spec the configure step checked)."""
    if not getattr(settings, "channel", None):
        return None
    from ..pipelines.channel import ChannelError, parse

    try:
        return parse(settings.channel)
    except ChannelError as e:  # a hand-edited run.json
        raise SettingsError(str(e)) from None


@dataclass(frozen=True)
class RunKnobs:
    """How a run executes, beside what it measures (settings.RunSettings): never written to
    run.json or the report and never fingerprinted, so a resume with another concurrency or
    timeout reuses every stored outcome. The plugin builds it once from the options
    (pytest_plugin/config.py); ``Harness.from_settings`` takes it without pytest."""

    concurrency: int = 1  # streaming trials in flight (--duplexact-concurrency)
    batch: int = 1  # stepped trials in lockstep sharing one model call (--duplexact-batch)
    timeout: float = DEFAULT_TIMEOUT  # seconds the model may go without answering (watchdog)
    judge_timeout: float | None = None  # seconds per judge / transcription question
    cache_dir: Path | None = None  # judge / simulator / transcription cache; None: the run's
    audio_format: str = "flac"  # recordings' files: flac (lossless, ~1/8 of wav) or wav
    bargein_branches: bool = True  # barge-in plays branch clips where an instance has them
    # largest lateness (s) of the harness on a wall-clock trial before it is re-run
    # (--duplexact-timing-tolerance); None: never re-run, the lateness is only recorded
    timing_tolerance: float | None = TIMING_TOLERANCE_S


@dataclass
class Harness:
    """Per-process state: the resolved model, judges, transcriber and the run directory."""

    model: Any
    run_dir: Path
    panel: Any = None
    transcriber: Any = None
    policy: Any = None
    bargein_branches: bool = True  # barge-in plays branch clips where an instance has them
    seed: int = 0
    model_options: dict = field(default_factory=dict)
    fingerprint: str | None = None  # RunSettings.fingerprint() of the run
    channel: Any = None  # pipelines.channel.Channel the model hears through (None: clean)
    # prefetch.Prefetcher when streaming with --duplexact-concurrency; batch.BatchRunner when
    # stepping with --duplexact-batch
    prefetcher: Any = None
    vad_cache: Any = None  # remote.cache.RequestCache: a re-scored recording skips the VAD
    timeout: float = DEFAULT_TIMEOUT  # seconds the model may go without answering (watchdog)
    audio_format: str = "flac"  # recordings' files: flac (lossless, ~1/8 of wav) or wav
    timing_tolerance: float | None = TIMING_TOLERANCE_S  # RunKnobs.timing_tolerance
    # offload.ScoringWorker while streaming trials are in flight (a Prefetcher): a finished
    # trial's files and VAD run there, off the process that holds the live sessions
    scoring_worker: Any = None

    @classmethod
    def from_settings(cls, settings, run_dir: Path, knobs: RunKnobs = RunKnobs(), *,
                      model: Any = None) -> "Harness":
        """The harness a run with these settings (settings.RunSettings) uses, without pytest:
        the model resolved from ``settings.model`` (unless ``model`` is given), judges,
        transcriber and simulator policy as the settings ask (wiring.py), caches under
        ``knobs.cache_dir`` (default <run_dir>/cache). ``knobs.concurrency`` > 1 keeps that
        many streaming trials in flight; ``knobs.batch`` > 1 steps that many stepped trials in
        lockstep with one shared model call (the model must offer ``step_batch``:
        models/base.py). ``knobs.timeout``: seconds the model may go without answering
        (watchdog.py); ``knobs.judge_timeout``: seconds per judge / transcription question,
        retries included."""
        from ..models import is_stepped, is_streaming, resolve_model
        from ..remote.cache import RequestCache
        from .wiring import make_panel, make_policy, make_transcriber

        run_dir = Path(run_dir)
        cache_dir = Path(knobs.cache_dir) if knobs.cache_dir else RunDir(run_dir).cache_dir
        judge_timeout, timeout, batch = knobs.judge_timeout, knobs.timeout, knobs.batch
        if model is None:
            model = resolve_model(settings.model, **settings.options)
        harness = cls(
            model=model, run_dir=run_dir,
            panel=make_panel(settings, cache_dir, judge_timeout),
            transcriber=make_transcriber(settings, cache_dir, judge_timeout),
            policy=make_policy(settings, cache_dir),
            seed=settings.seed, model_options=settings.options,
            fingerprint=settings.fingerprint(), channel=_channel_of(settings),
            vad_cache=RequestCache(cache_dir),  # re-scoring the same audio skips the VAD
            timeout=timeout, bargein_branches=knobs.bargein_branches,
            audio_format=knobs.audio_format, timing_tolerance=knobs.timing_tolerance,
        )
        if harness.channel is not None and is_stepped(model):
            from ..pipelines.channelled import echo_problem

            if problem := echo_problem(harness.channel, model):
                raise SettingsError(problem)
        # a server that answers one request at a time (mini-omni2) says so: more in flight
        # would only queue behind each other and time the queue, not the model
        concurrency = min(knobs.concurrency,
                          traits(model).max_concurrency or knobs.concurrency)
        if batch > 1:
            from ..models import is_batched
            from .batch import BatchRunner

            if not is_batched(model):
                raise SettingsError(
                    f"--duplexact-batch={batch}: model {settings.model!r} does not offer "
                    "batched stepping (step_batch, start_slot, finish_slot: docs/models.md); "
                    "use --duplexact-batch=1" + (" and --duplexact-concurrency for a streaming "
                                                 "model" if is_streaming(model) else ""))
            harness.prefetcher = BatchRunner(model, harness.record_async, batch, timeout)
        elif concurrency > 1 and is_streaming(model):
            from .offload import ScoringWorker
            from .prefetch import Prefetcher

            harness.prefetcher = Prefetcher(harness.record_async, concurrency, timeout,
                                            tolerance=knobs.timing_tolerance)
            if ScoringWorker.available():  # its process starts with the first trial scored
                harness.scoring_worker = ScoringWorker()
        return harness

    def close(self) -> None:
        """At the end of the run: the trials still in flight and the scoring worker."""
        if self.prefetcher is not None:
            self.prefetcher.close()
        if self.scoring_worker is not None:
            self.scoring_worker.close()

    @property
    def dir(self) -> RunDir:
        return RunDir(self.run_dir)

    def instance_dir(self, instance: Instance) -> Path:
        return self.dir.instance(instance.id)

    def _commit(self, instance: Instance, outcome: InstanceOutcome,
                spent: dict | None = None) -> None:
        """The journal entry, written last: the instance is finished once this file exists.
        ``spent`` (usage.delta) is kept so a resumed run reports what the whole run cost."""
        self.dir.write_outcome(instance.id, outcome.to_dict(), self.fingerprint, spent)

    def record(self, instance: Instance):
        """Run the model on the instance through its pipeline; returns the Recording."""
        if self.prefetcher is not None:
            return self.prefetcher.result(instance)
        return run_watched(lambda: self.record_async(instance), timeout=self.timeout,
                           what=f"instance {instance.id}")

    async def record_async(self, instance: Instance, model: Any = None):
        """The trial, with the harness's model or ``model`` (a batched slot's session
        factory: run/batch.py)."""
        from ..pipelines import run_instance

        info = SessionInfo(instance=instance, seed=self.seed, options=self.model_options)
        return await self._on_time(lambda: run_instance(
            instance, self.model if model is None else model, info, policy=self.policy,
            branches=self.bargein_branches, channel=self.channel))

    async def _on_time(self, trial):
        """The timing guard: a wall-clock trial whose own lateness exceeds the
        tolerance is never scored; it runs again (up to TIMING_RERUNS times, each after the
        prefetcher lowered the trials in flight), then is TimingUnreliable. Its recording's
        ``clock`` says how late it was and how often it ran; what each attempt's provider
        billed is kept (on the recording, or on the TimingUnreliable raised), stopped
        attempts' included. Stepped trials (no ``clock``) pass through untouched."""
        from ..data import usage
        from ..data.results import worst_lag_ms as worst_ms
        from ..pipelines.clock import TOLERANCE, TimingUnreliable, TrialLate

        tol = self.timing_tolerance
        TOLERANCE.set(tol)  # this task's context: the trial's sessions stop once over it
        tol_ms = None if tol is None else round(tol * 1000, 1)
        billed: list[dict] = []
        for attempt in range(TIMING_RERUNS + 1):
            try:
                recording = await trial()
            except TrialLate as late:  # stopped early: over the tolerance, not scored
                recording, lateness = None, late.clock
                billed.append({"model": getattr(late, "usage", None) or {}})
                # its traceback's frames hold the trial's duplex, which holds the error: a
                # cycle per re-run, left to the collector, whose full collections stall every
                # live session (live_gc.py); the re-run needs neither
                late.__traceback__ = None
            else:
                if recording.clock is None:  # a stepped trial: no wall clock
                    return recording
                billed.append({"model": recording.usage} if recording.usage else {})
                lateness = recording.clock
            clock = dict(lateness, tolerance_ms=tol_ms, reruns=attempt, unreliable=False)
            if recording is not None and (tol is None or worst_ms(clock) <= tol * 1000):
                recording.clock = clock
                if attempt:  # every attempt's sessions were billed
                    recording.usage = usage.total(billed).get("model", {})
                return recording
            quieter = getattr(self.prefetcher, "quieter", None)
            if attempt < TIMING_RERUNS and quieter is not None:
                await quieter(attempt + 1)
        unreliable = TimingUnreliable(dict(clock, unreliable=True), TIMING_RERUNS + 1)
        unreliable.usage = usage.total(billed).get("model", {})  # Harness.run charges it
        raise unreliable

    def timeline(self, recording, speech=None) -> Timeline:
        from ..listen.segmentation import build_timeline

        return build_timeline(recording, transcriber=self.transcriber, vad_cache=self.vad_cache,
                              speech=speech)

    def analyse(self, recording, folder: Path, instance_id: str | None) -> Timeline:
        """Write the recording's files to ``folder`` and build its timeline. With a scoring
        worker (streaming trials in flight) the files and the VAD are the worker's
        (offload.py), so this process keeps its cores and the GIL for the live sessions;
        otherwise (stepped, or one trial at a time: no live session to protect) both run
        here. The same bytes and the same timeline either way."""
        from ..data.recording_io import save_recording
        from ..listen import vad
        from .offload import ScoringWorkerError, runs_in_worker

        if self.scoring_worker is None:
            save_recording(recording, folder, instance_id=instance_id,
                           audio_format=self.audio_format)
            return self.timeline(recording)
        job = dict(instance_id=instance_id, audio_format=self.audio_format,
                   params=vad.DEFAULT_PARAMS, cache_root=getattr(self.vad_cache, "root", None))
        # native words need no transcriber (build_timeline then never calls it)
        transcriber = None if recording.transcript else self.transcriber
        try:
            if runs_in_worker(transcriber):
                return self.scoring_worker.write_and_segment(recording, folder,
                                                             transcriber=transcriber, **job)
            speech = self.scoring_worker.write_and_detect(recording, folder, **job)
        except ScoringWorkerError as e:
            raise self._kept(recording, folder, instance_id, e) from None
        return self.timeline(recording, speech=speech)  # the transcriber runs here

    def _kept(self, recording, folder: Path, instance_id: str | None,
              error: Exception) -> Exception:
        """The scoring worker died (or was stopped) on a streamed, maybe billed trial: its
        recording is written here, so it can be scored again without calling the model
        (resume re-scores it: journal.py); the error says so."""
        from ..data.recording_io import save_recording

        try:
            save_recording(recording, folder, instance_id=instance_id,
                           audio_format=self.audio_format,
                           meta={"clock": recording.clock, "usage": recording.usage})
        except (OSError, ValueError) as e:
            return type(error)(f"{error} (its recording could not be kept: {e})")
        return type(error)(f"{error}; its recording is kept in {self.dir.relative(folder)}, "
                           "so --duplexact-resume scores it again without calling the model")

    def run(self, instance: Instance) -> InstanceOutcome:
        """Record, segment and score; raises on harness/model errors (the caller decides how
        an error is reported), after writing what was measured so far."""
        from ..data import usage

        before = usage.snapshot(self)
        folder = self.dir.reopen(instance.id)
        try:
            recording = self.record(instance)
        except Exception as e:  # a failed trial's sessions were billed too (its ``usage``)
            usage.charge_model(self, e)
            raise
        usage.charge_model(self, recording)  # between the snapshots: this instance's cost
        return self._score(instance, recording, folder, before)

    def rescore(self, instance: Instance) -> InstanceOutcome:
        """Score again the recording kept when the scoring worker died on this instance
        (``_kept``; journal.Status.RESCORE), without calling the model: the trial's clock and
        what its sessions billed come from the kept recording.json."""
        from ..data import usage
        from ..data.recording_io import RECORDING_FILE, load_recording
        from ..data.results import clock_problem
        from .journal import usage_problem
        from .rundir import read_json_object

        before = usage.snapshot(self)
        folder = self.instance_dir(instance)
        recording = load_recording(folder)
        meta = read_json_object(folder / RECORDING_FILE).get("meta")
        meta = meta if isinstance(meta, dict) else {}
        clock, spent = meta.get("clock"), meta.get("usage")
        if clock is not None and clock_problem(clock) is None:
            recording.clock = clock
        if isinstance(spent, dict) and usage_problem({"model": spent}) is None:
            recording.usage = spent
            usage.charge_model(self, recording)  # its earlier error journaled no usage
        self.dir.reopen(instance.id)  # the error's outcome and error.txt go; the tracks stay
        return self._score(instance, recording, folder, before)

    def _score(self, instance: Instance, recording, folder: Path,
               before: dict) -> InstanceOutcome:
        from ..data import usage

        rel = self.dir.relative(folder)
        tl = self.analyse(recording, folder, instance.id)
        self.dir.write_timeline(instance.id, timeline_to_dict(tl, instance))

        def audio_of(seg: Segment) -> np.ndarray:
            sr = recording.sample_rate
            return recording.output[int(seg.start * sr): int(np.ceil(seg.end * sr))]

        clear = getattr(self.panel, "clear_unreached", None)
        if clear is not None:  # whether a judge is gone is this instance's to say
            clear()
        s = scoring.score(instance, tl, self.panel, audio_of)
        immediate = s.immediate
        if immediate is not None and immediate.verdict is Verdict.FAILURE:
            why = no_speech_diagnosis(recording.output, recording.sample_rate, tl)
            if why:  # say plainly what the rules could not see (listen/diagnosis.py)
                immediate = dataclasses.replace(immediate, reason=f"{immediate.reason}; {why}")
        outcome = InstanceOutcome(instance.id, instance.action, instance.condition,
                                  instance.scenario, instance.source, immediate,
                                  s.subsequent, s.timing, None, rel, corpus=instance.corpus,
                                  clock=recording.clock,
                                  latency=trial_latency.onset_latency(instance, s.immediate),
                                  responded=trial_latency.responded(tl))
        self._commit(instance, outcome, usage.delta(usage.snapshot(self), before))
        return outcome

    def unsupported_outcome(self, instance: Instance, reason: str) -> InstanceOutcome:
        """The journaled outcome of an instance the model cannot take part in (a pipeline it
        does not support): not applicable, never a miss, and not run again on resume."""
        outcome = InstanceOutcome(instance.id, instance.action, instance.condition,
                                  instance.scenario, instance.source,
                                  ImmediateResult(Verdict.NOT_APPLICABLE, reason),
                                  corpus=instance.corpus)
        self._commit(instance, outcome)
        return outcome

    def error_outcome(self, instance: Instance, exc: BaseException) -> InstanceOutcome:
        """The outcome of an instance whose run crashed: an error, never a miss."""
        msg = f"{type(exc).__name__}: {exc}"
        outcome = InstanceOutcome(instance.id, instance.action, instance.condition,
                                  instance.scenario, instance.source, error=msg,
                                  recording=self.dir.relative(self.instance_dir(instance)),
                                  corpus=instance.corpus, clock=getattr(exc, "clock", None))
        try:
            self.dir.write_error(instance.id, "".join(traceback.format_exception(exc)))
            self._commit(instance, outcome)
        except OSError as e:  # the disk that failed the instance may fail this too: the
            # error still reaches the report (in memory); resume re-runs the instance
            outcome = dataclasses.replace(outcome, error=f"{msg} (not journaled: {e})")
        return outcome
