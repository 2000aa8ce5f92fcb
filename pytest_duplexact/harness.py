"""Runs one instance end to end: model -> pipeline -> recording -> timeline -> scores.

Every stage's product is written to the run directory as it is known (recording first, the
outcome last, each write-then-rename), so a failure can be listened to and re-scored, and a
killed run keeps every finished instance.
"""

from __future__ import annotations

import asyncio
import json
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import scoring
from .instance import Instance
from .journal import (ERROR_FILE, FINGERPRINT_KEY, INSTANCES_DIR, OUTCOME_FILE, TIMELINE_FILE,
                      USAGE_KEY)
from .models.base import SessionInfo
from .results import InstanceOutcome
from .timeline import Segment, Timeline


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary name in the same folder, then rename: a reader (or a resumed
    run) sees the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
                      + "\n")


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


@dataclass
class Harness:
    """Per-process state: the resolved model, judges, transcriber and the run directory."""

    model: Any
    model_name: str
    run_dir: Path
    panel: Any = None
    transcriber: Any = None
    policy: Any = None
    seed: int = 0
    model_options: dict = field(default_factory=dict)
    fingerprint: str | None = None  # journal.fingerprint of the run's settings
    prefetcher: Any = None  # prefetch.Prefetcher when streaming with --duplexact-concurrency
    vad_cache: Any = None  # judges.cache.RequestCache: a re-scored recording skips the VAD
    audio_format: str = "flac"  # recordings' files: flac (lossless, ~1/8 of wav) or wav

    def instance_dir(self, instance: Instance) -> Path:
        return self.run_dir / INSTANCES_DIR / instance.id

    def _reopen(self, folder: Path) -> None:
        """Before an instance (re)runs, its folder stops being a finished one: the outcome
        goes first, so a run killed mid-instance never leaves an old outcome beside new
        files."""
        for name in (OUTCOME_FILE, ERROR_FILE):
            (folder / name).unlink(missing_ok=True)
        for tmp in folder.glob(".*.part"):  # temporaries of a killed attempt
            tmp.unlink(missing_ok=True)

    def _commit(self, folder: Path, outcome: InstanceOutcome, spent: dict | None = None) -> None:
        """The journal entry, written last: the instance is finished once this file exists.
        ``spent`` (usage.delta) is kept so a resumed run reports what the whole run cost."""
        write_json_atomic(folder / OUTCOME_FILE, {**outcome.to_dict(),
                                                  FINGERPRINT_KEY: self.fingerprint,
                                                  USAGE_KEY: spent})

    def record(self, instance: Instance):
        """Run the model on the instance through its pipeline; returns the Recording."""
        if self.prefetcher is not None:
            return self.prefetcher.result(instance)
        return asyncio.run(self.record_async(instance))

    async def record_async(self, instance: Instance):
        from .pipelines import run_instance

        info = SessionInfo(instance=instance, seed=self.seed, options=self.model_options)
        return await run_instance(instance, self.model, info, policy=self.policy)

    def timeline(self, recording) -> Timeline:
        from .segmentation import build_timeline

        return build_timeline(recording, transcriber=self.transcriber, vad_cache=self.vad_cache)

    def run(self, instance: Instance) -> InstanceOutcome:
        """Record, segment and score; raises on harness/model errors (the caller decides how
        an error is reported), after writing what was measured so far."""
        from . import usage
        from .recording_io import save_recording

        before = usage.snapshot(self)
        folder = self.instance_dir(instance)
        rel = folder.relative_to(self.run_dir).as_posix()
        self._reopen(folder)
        recording = self.record(instance)
        save_recording(recording, folder, instance_id=instance.id,
                       audio_format=self.audio_format)
        tl = self.timeline(recording)
        write_json_atomic(folder / TIMELINE_FILE, timeline_to_dict(tl, instance))

        def audio_of(seg: Segment) -> np.ndarray:
            sr = recording.sample_rate
            return recording.output[int(seg.start * sr): int(np.ceil(seg.end * sr))]

        s = scoring.score(instance, tl, self.panel, audio_of)
        outcome = InstanceOutcome(instance.id, instance.action, instance.condition,
                                  instance.scenario, instance.source, s.immediate,
                                  s.subsequent, s.timing, None, rel)
        self._commit(folder, outcome, usage.delta(usage.snapshot(self), before))
        return outcome

    def error_outcome(self, instance: Instance, exc: BaseException) -> InstanceOutcome:
        """The outcome of an instance whose run crashed: an error, never a miss."""
        folder = self.instance_dir(instance)
        msg = f"{type(exc).__name__}: {exc}"
        outcome = InstanceOutcome(instance.id, instance.action, instance.condition,
                                  instance.scenario, instance.source, error=msg,
                                  recording=folder.relative_to(self.run_dir).as_posix())
        write_text_atomic(folder / ERROR_FILE, "".join(traceback.format_exception(exc)))
        self._commit(folder, outcome)
        return outcome
