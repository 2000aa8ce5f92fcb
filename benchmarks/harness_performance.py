"""A benchmark of the harness itself: throughput, timing precision, live concurrency, re-scoring
and memory, each a ratio measured in the same run (docs/benchmarks.md).

1. Stepped throughput: silent, oracle and endpoint over a synthetic set (the bundled fixtures
   replicated to 300 instances with varied leading silence), each in its own process, timing
   the stages of ``Harness.run`` (pipeline, recording write, VAD, transcription, scoring,
   journal) by wrapping the very functions it calls. Per core = per CPU-second of the process.
   The VAD is the floor: total time over the VAD stage's own time on the same audio.
2. Timing precision: a scripted stepped model places real speech clips (the fixtures'
   reference / backchannel / recovery clips) at known instants, clean and in -35 dBFS noise;
   the real pipeline and segmentation find them. Onset / offset error of the timeline's
   segments, gap error on the raw VAD spans, and how often a verdict near a window edge
   (take_turn immediate at user_end + {0, 0.5} s +- delta, hold_floor gaps of 0.5 s +- delta)
   differs from the verdict the placed truth deserves.
3. Live concurrency: benchmarks/realtime_concurrency.py's sessions against the loopback fake
   realtime server: wall time over ideal and onset error at 1, 4, 16 and 32 sessions.
4. Re-scoring: the oracle run replayed from disk with ``recorded:DIR`` and the judges pointed at
   the fake OpenAI server (tests/fakes/openai_server.py, in-process), twice with one cache
   directory, empty before the first pass: model sessions opened (must be 0), judge requests
   counted on the server (0 when warm), speed cold and warm.
5. Memory: peak RSS of a whole plugin run of 30 and of 300 instances, each in a fresh process
   (benchmarks/memory.py's ``run``).

Also checks that the VAD's skipping of quiet stretches leaves the segments as they are with
the network on every frame (every bundled clip, the oracle's and endpoint's outputs), and that
the VAD's ONNX and TorchScript backends find the same spans on the bundled clips, the noise
grid and the model outputs (benchmarks/vad_backends.py, part ``backends``). Part ``noise``
runs part 2's sessions on the noise grid (pytest_duplexact/degrade.py), ``size`` measures run
folders as FLAC and WAV (benchmarks/run_size.py), ``asr`` the offline transcriber's word-class
agreement under noise (benchmarks/asr_accuracy.py). The full-size rehearsal is
benchmarks/rehearsal.py (hours; not a part).

    python -m benchmarks.harness_performance [--quick] [--out results.json]

Prints a table with the targets and writes every figure as JSON. ``--quick`` (~2 min) runs
smaller versions of each part.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchmarks import asr_accuracy, run_size, vad_backends
from benchmarks._common import (
    ROOT,
    Clock,
    load_average,
    machine,
    peak_rss_mb,
    plugin_run,
    replicate_dataset,
    stats_ms,
)
from pytest_duplexact.data import audio, recording_io
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.listen import degrade, segmentation, vad
from pytest_duplexact.rules import (
    requires,
    scoring,
)
from pytest_duplexact.run import rundir as rundir_mod

MODELS = ("silent", "oracle", "endpoint")
TARGETS = {
    "oracle_total_over_vad": 1.5,  # at most
    "oracle_x_realtime_per_core": 300.0,  # at least
    "silent_x_realtime_per_core": 2000.0,  # at least
    "onset_median_ms": 20.0, "onset_p95_ms": 50.0,  # clean speech, at most
    "live_wall_over_ideal_16": 1.1,  # at most
    "rescore_x_realtime": 1000.0,  # at least
    "memory_growth_mb": 50.0,  # peak RSS at 300 minus at 30, at most
    "noise_p95_ms": 50.0,  # -35 dBFS white / babble: offset and gap |error| p95, at most
}
# The grid's conditions of real model audio (degrade.py): |error| p95 at most, in ms, per
# measure; how many of the 72 utterances may be joined to another; whether no verdict may flip
# at +-50 ms from a rule edge; and median |error| at most (docs/timeline.md says why each).
GRID_TARGETS = {
    "breath-50": {"p95": {"onset_ms": 50, "offset_ms": 50, "gap_error_ms": 50}, "joined": 0,
                  "no_flips_50": True},
    "click": {"p95": {"onset_ms": 50, "offset_ms": 50, "gap_error_ms": 50}, "joined": 0,
              "no_flips_50": True},
    "opus": {"p95": {"onset_ms": 50, "offset_ms": 50, "gap_error_ms": 50}, "joined": 0,
             "no_flips_50": True},
    "murmur-56": {"p95": {"onset_ms": 50, "offset_ms": 100, "gap_error_ms": 50}, "joined": 0,
                  "no_flips_50": True},
    "hum-50": {"p95": {"onset_ms": 50, "offset_ms": 50, "gap_error_ms": 50}, "joined": 0},
    "reverb": {"p95": {"offset_ms": 200, "gap_error_ms": 200}, "joined": 0},
    "murmur-48": {"median": {"onset_ms": 10, "offset_ms": 10, "gap_error_ms": 25}, "joined": 6},
}


# --- 1. stepped throughput ------------------------------------------------------------------

class Stages:
    """Wall and CPU time per stage of ``Harness.run``, taken by wrapping the functions it calls
    (module attributes, so the harness's own code runs unchanged). Nested stages (the VAD and
    transcription inside the timeline) are reported inside their parent."""

    def __init__(self):
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: Counter = Counter()
        self._undo: list = []

    def timed(self, stage: str, fn):
        def wrapper(*args, **kwargs):
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[stage] += time.perf_counter() - w
                self.cpu[stage] += time.process_time() - c
                self.calls[stage] += 1
        return wrapper

    def patch(self, obj, name: str, stage: str) -> None:
        old = getattr(obj, name)
        self._undo.append((obj, name, old))
        setattr(obj, name, self.timed(stage, old))

    def install(self, h) -> "Stages":
        h.record = self.timed("pipeline", h.record)
        self.patch(recording_io, "save_recording", "write")
        self.patch(segmentation, "build_timeline", "timeline")
        self.patch(vad, "speech_spans", "vad")
        self.patch(segmentation, "assign_words", "transcription")
        self.patch(segmentation, "transcribe_segments", "transcription")
        self.patch(scoring, "score", "scoring")
        self.patch(rundir_mod, "write_json", "journal")
        return self

    def uninstall(self) -> None:
        for obj, name, old in reversed(self._undo):
            setattr(obj, name, old)
        self._undo.clear()

    def split(self, total: Clock) -> dict:
        """Exclusive stages summing to the total: the timeline minus its VAD and transcription
        is "segmentation"; what no wrapper saw (folders, the outcome object) is "other"."""
        out = {}
        for kind, d in (("wall", self.wall), ("cpu", self.cpu)):
            seg = d["timeline"] - d["vad"] - d["transcription"]
            parts = {"pipeline": d["pipeline"], "write": d["write"], "vad": d["vad"],
                     "transcription": d["transcription"], "segmentation": seg,
                     "scoring": d["scoring"], "journal": d["journal"]}
            parts["other"] = getattr(total, kind) - sum(parts.values())
            out[kind] = {k: round(v, 4) for k, v in parts.items()}
        return out


def plugin_harness(model, model_name: str, run_dir: Path, panel=None,
                   cache_dir: Path | None = None):
    """A Harness wired as the plugin wires one with default options (Harness.from_settings)."""
    from pytest_duplexact.run.harness import Harness, RunKnobs
    from pytest_duplexact.run.settings import RunSettings

    h = Harness.from_settings(RunSettings(model=model_name), run_dir,
                              RunKnobs(cache_dir=cache_dir), model=model)
    if panel is not None:
        h.panel = panel
    return h


def run_all(h, instances) -> tuple[Clock, float, Counter, list]:
    """Run every instance; (clock, stream seconds, immediate verdicts, errors)."""
    durations: list[float] = []
    record = h.record

    def measured(instance):
        rec = record(instance)
        durations.append(rec.duration)
        return rec

    h.record = measured
    verdicts: Counter = Counter()
    errors = []
    with Clock() as clock:
        for inst in instances:
            try:
                verdicts[h.run(inst).immediate.verdict.value] += 1
            except Exception as e:  # counted and shown: a benchmark must not hide failures
                errors.append(f"{inst.id}: {type(e).__name__}: {e}")
    h.record = record
    return clock, sum(durations), verdicts, errors


def silero_floor(run_dir: Path, sample: int) -> dict:
    """silero's network alone over whole recorded output tracks (no silence skipping), and the
    VAD as the harness runs it, on up to ``sample`` recordings spread over the run."""
    folders = sorted((run_dir / "instances").iterdir())
    if not folders:
        return {}
    pick = folders[:: max(1, len(folders) // sample)][:sample]
    seconds, net, spans = 0.0, Clock(), Clock()
    for f in pick:
        x = vad.as_mono(audio.read(recording_io.track_file(f, "output")), audio.SAMPLE_RATE)
        seconds += len(x) / vad.VAD_SAMPLE_RATE
        with net:
            vad.speech_probabilities(x)
        with spans:
            vad.speech_spans(x, vad.VAD_SAMPLE_RATE)
    return {"recordings": len(pick), "audio_s": round(seconds, 2),
            "silero_network_x_realtime_per_core": round(seconds / max(net.cpu, 1e-9), 1),
            "vad_x_realtime_per_core": round(seconds / max(spans.cpu, 1e-9), 1)}


def throughput_worker(args) -> dict:
    """One model over the dataset in this (fresh) process."""
    load0 = load_average()
    with Clock() as startup:
        from pytest_duplexact.models import resolve_model

        vad._load()  # silero's weights; the harness loads them on first use
        model = resolve_model(args.model)
        ds = load_dataset(args.dataset, requires=requires)
        instances = list(ds.instances[:: args.stride])[: args.limit]
    run_dir = Path(args.run_dir)
    h = plugin_harness(model, args.model, run_dir)
    stages = Stages().install(h)
    total, stream_s, verdicts, errors = run_all(h, instances)
    stages.uninstall()
    n = len(instances)
    out = {
        "model": args.model, "instances": n, "stream_s": round(stream_s, 2),
        "startup_s": {"wall": round(startup.wall, 3), "cpu": round(startup.cpu, 3)},
        "total_s": {"wall": round(total.wall, 3), "cpu": round(total.cpu, 3)},
        "stages_s": stages.split(total),
        "instances_per_s": {"wall": round(n / total.wall, 2),
                            "per_core": round(n / total.cpu, 2)},
        "x_realtime": {"wall": round(stream_s / total.wall, 1),
                       "per_core": round(stream_s / total.cpu, 1)},
        "total_over_vad": round(total.cpu / stages.cpu["vad"], 2) if stages.cpu["vad"] else None,
        "immediate_verdicts": dict(verdicts), "errors": errors[:10], "error_count": len(errors),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "load_average": {"before": load0, "after": load_average()},
    }
    if args.floor_sample:
        out["floor"] = silero_floor(run_dir, args.floor_sample)
    return out


def spawn_worker(model: str, dataset: Path, run_dir: Path, limit: int, stride: int,
                 floor_sample: int) -> dict:
    out = run_dir.with_suffix(".json")
    cmd = [sys.executable, "-m", "benchmarks.harness_performance", "--worker", "--model", model,
           "--dataset", str(dataset), "--run-dir", str(run_dir), "--limit", str(limit),
           "--stride", str(stride), "--floor-sample", str(floor_sample), "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=str(ROOT))
    return json.loads(out.read_text())


# --- 2. timing precision ----------------------------------------------------------------------

@dataclass(frozen=True)
class Utterance:
    """A speech clip and where its speech sits inside it (first word start, last word end)."""

    path: Path
    audio: np.ndarray
    words: tuple
    speech_start: float
    speech_end: float

    @property
    def length(self) -> float:
        return self.speech_end - self.speech_start


MAX_CLIP_SPEECH_S = 3.5  # the long "talk" clips would run past the end of the session


def speech_clips(ds) -> list[Utterance]:
    """Every distinct reference / backchannel / recovery clip whose words have no pause over
    0.25 s (so it is one segment and one raw VAD span apart from short stop closures) and
    whose speech lasts at most MAX_CLIP_SPEECH_S."""
    seen, out = set(), []
    for inst in ds.instances:
        for role in ("reference", "backchannel", "recovery"):
            clip = inst.clips.get(role)
            if clip is None or clip.path in seen or not clip.transcript:
                continue
            seen.add(clip.path)
            ws = clip.transcript
            if max((b.start - a.end for a, b in zip(ws, ws[1:])), default=0.0) > 0.25 \
                    or ws[-1].end - ws[0].start > MAX_CLIP_SPEECH_S:
                continue
            out.append(Utterance(clip.path, clip.load(), ws, ws[0].start, ws[-1].end))
    return sorted(out, key=lambda u: str(u.path))


class ScriptedModel:
    """A stepped model that plays a precomputed output track: the benchmark decides exactly
    when it speaks. Its native transcript is the placed clips' words."""

    name = "scripted"
    sample_rate = audio.SAMPLE_RATE
    frame_size = 320

    def __init__(self, track: np.ndarray, words):
        from pytest_duplexact.data.timeline import Word

        self.track = track
        self.by_frame: dict[int, list] = defaultdict(list)
        for w in words:
            k = int(w.start * self.sample_rate) // self.frame_size
            t0 = k * self.frame_size / self.sample_rate
            self.by_frame[k].append(Word(w.start - t0, w.end - t0, w.text))

    def start(self, info) -> None:
        self.k = 0

    def step(self, frame):
        from pytest_duplexact.models.contract import StepOutput

        a = self.k * self.frame_size
        out = self.track[a: a + self.frame_size]
        if len(out) < self.frame_size:
            out = np.pad(out, (0, self.frame_size - len(out)))
        words = self.by_frame.get(self.k, ())
        self.k += 1
        return StepOutput(out, tuple(words))

    def finish(self) -> None:
        pass


NOISE_DBFS = -35.0


def place(track: np.ndarray, words: list, u: Utterance, onset: float) -> tuple[float, float]:
    """Mix ``u`` into ``track`` so its speech starts at ``onset`` (to the sample); returns the
    placed (onset, offset) truth."""
    from pytest_duplexact.data.timeline import Word

    sr = audio.SAMPLE_RATE
    a = int(round((onset - u.speech_start) * sr))
    track[a: a + len(u.audio)] += u.audio[: len(track) - a]
    t0 = a / sr
    words.extend(Word(t0 + w.start, t0 + w.end, w.text) for w in u.words)
    return t0 + u.speech_start, t0 + u.speech_end


PRECISION_CONDITIONS = ("clean", f"white{NOISE_DBFS:.0f}")


def precision_cases(quick: bool, conditions=PRECISION_CONDITIONS) -> list[dict]:
    """The grid: where take_turn's onset sits (edge 0.0 or 0.5 s after user_end, +- delta),
    the hold_floor gap (0.5 s +- delta), the noise condition (``degrade``: clean, white-35,
    ...; the key is still called ``snr``), and which clips and host instance."""
    deltas = (-0.05, -0.02, -0.01, 0.01, 0.02, 0.05)
    edges = (0.5,) if quick else (0.0, 0.5)
    reps = 1 if quick else 2
    cases = []
    for snr in conditions:
        k = 0
        for rep in range(reps):
            for edge in edges:
                for d in deltas:
                    gap_delta = deltas[(k + 2 * rep + 1) % len(deltas)]
                    cases.append({"snr": snr, "edge": edge, "delta": d, "gap": 0.5 + gap_delta,
                                  "k": k + 1000 * rep})
                    k += 1
    return cases


def run_precision_case(case: dict, hosts, clips: list[Utterance]) -> dict:
    """One session: A at user_end + edge + delta (take_turn), then B and C with the hold gap;
    the cue spans B's speech into C, so the hold_floor window [cue.start, cue.end + 1] holds
    the gap and a second of C."""
    from pytest_duplexact.data.taxonomy import BACKCHANNEL_MAX_WORDS, OBSERVATION_PERIOD_S
    from pytest_duplexact.data.timeline import Cue
    from pytest_duplexact.models.contract import SessionInfo
    from pytest_duplexact.pipelines import run_instance
    from pytest_duplexact.rules import hold_floor, take_turn

    k = case["k"]
    host = hosts[k % len(hosts)]
    ue = host.annotations.user_end
    # the speech lengths cycle: B is short (< 1 s), medium (1-2 s) or long in turn; A must
    # be substantive (> 3 words) and C must hold the hold_floor window's last second
    by_length = [[u for u in clips if lo <= u.length < hi]
                 for lo, hi in ((0.0, 1.0), (1.0, 2.0), (2.0, math.inf))]
    subst = [u for u in clips if len(u.words) > BACKCHANNEL_MAX_WORDS]
    longs = [u for u in clips if u.length >= 1.3]
    a_clip = subst[(7 * k) % len(subst)]
    b_pool = by_length[k % 3] or clips
    b_clip = b_pool[(5 * k + 3) % len(b_pool)]
    c_clip = longs[(3 * k + 1) % len(longs)]
    sr = audio.SAMPLE_RATE
    n = int((host.clip("user").duration + OBSERVATION_PERIOD_S + 1.0) * sr)
    track = np.zeros(n, np.float32)
    words: list = []
    a = place(track, words, a_clip, ue + case["edge"] + case["delta"])
    b = place(track, words, b_clip, a[1] + 1.5 + (k % 5) * 0.0071)
    c = place(track, words, c_clip, b[1] + case["gap"])
    if c[1] + 1.0 > n / sr - 1.0:
        raise RuntimeError(f"precision case {case}: the clips run past the session")
    track = degrade.apply(case["snr"], track, seed=k)  # clipped to [-1, 1]
    rec = asyncio.run(run_instance(host, ScriptedModel(track, words), SessionInfo(host)))
    # The cue is set on the recording as Simulator Replay would; the rules read only its span.
    rec = replace(rec, cue=Cue(round(b[0] + 0.1, 6), round(c[0], 6), forced=False))
    tl = segmentation.build_timeline(rec)
    placed = (a, b, c)
    edges = []  # per placed utterance: its segment's edge errors, or why there are none
    for on, off in placed:
        hits = [s for s in tl.segments if s.start < off and on < s.end]
        seg = max(hits, key=lambda s: min(s.end, off) - max(s.start, on), default=None)
        if seg is None:
            edges.append({"missed": True})
        elif sum(1 for p, q in placed if seg.start < q and p < seg.end) > 1:
            edges.append({"joined": True})  # one segment over two placed utterances
        else:
            edges.append({"onset": seg.start - on, "offset": seg.end - off})
    false_alarms = sum(1 for s in tl.segments
                       if not any(s.start < off and on < s.end for on, off in placed))
    mid = (b[1] + c[0]) / 2
    raw = tl.speech_spans
    b_end = max((s.end for s in raw if s.start < mid), default=math.nan)
    c_start = min((s.start for s in raw if s.end > mid), default=math.nan)
    if any(s.start <= mid <= s.end for s in raw):
        b_end = c_start = mid  # a span bridges the gap: the VAD heard none
    true_gap = c[0] - b[1]
    tt = take_turn.immediate(host.annotations, tl, "immediate")
    hf = hold_floor.immediate(host.annotations, tl)
    return {**case, "host": host.id, "clips": [u.path.name for u in (a_clip, b_clip, c_clip)],
            "lengths": [round(u.length, 3) for u in (a_clip, b_clip, c_clip)],
            "edges": edges, "false_alarms": false_alarms,
            "gap_error": (c_start - b_end) - true_gap,
            "take_turn": {"truth": bool(ue - 1e-9 <= a[0] <= ue + 0.5 + 1e-9),
                          "verdict": tt.verdict.value},
            "hold_floor": {"truth": bool(true_gap <= 0.5 + 1e-9), "verdict": hf.verdict.value}}


def summarise_precision(rows: list[dict]) -> dict:
    out = {}
    for snr in dict.fromkeys(r["snr"] for r in rows):
        rs = [r for r in rows if r["snr"] == snr]
        found = [e for r in rs for e in r["edges"] if "onset" in e]
        missed = sum(1 for r in rs for e in r["edges"] if e.get("missed"))
        joined = sum(1 for r in rs for e in r["edges"] if e.get("joined"))
        on = [e["onset"] for e in found]
        off = [e["offset"] for e in found]
        off_bias = float(np.median(off)) if off else 0.0
        flips = {}
        for rule in ("take_turn", "hold_floor"):
            for mag in sorted({abs(r["delta"] if rule == "take_turn" else r["gap"] - 0.5)
                               for r in rs}):
                sel = [r for r in rs if math.isclose(
                    abs(r["delta"] if rule == "take_turn" else r["gap"] - 0.5), mag)]
                wrong = [r for r in sel if (r[rule]["verdict"] == "success") != r[rule]["truth"]]
                flips[f"{rule} +-{round(mag * 1000)}ms"] = {"n": len(sel), "flipped": len(wrong)}
        by_length = {}
        for name, lo, hi in (("short <1 s", 0.0, 1.0), ("medium 1-2 s", 1.0, 2.0),
                             ("long >=2 s", 2.0, math.inf)):
            es = [e for r in rs for e, n in zip(r["edges"], r["lengths"])
                  if "onset" in e and lo <= n < hi]
            by_length[name] = {"onset_ms": stats_ms([e["onset"] for e in es]),
                               "offset_ms": stats_ms([e["offset"] for e in es])}
        out[snr] = {
            "utterances": len(found) + missed + joined, "missed": missed,
            "by_speech_length": by_length,
            "joined_into_one_segment": joined,
            "false_alarm_segments": sum(r["false_alarms"] for r in rs),
            "onset_ms": stats_ms(on), "offset_ms": stats_ms(off),
            "offset_bias_ms": round(off_bias * 1000, 1),
            "offset_ms_bias_corrected": stats_ms(off, off_bias),
            "gap_error_ms": stats_ms([r["gap_error"] for r in rs]),
            "verdict_flips": flips,
        }
    return out


def precision(quick: bool, conditions=PRECISION_CONDITIONS) -> dict:
    ds = load_dataset(bundled_root(), requires=requires)
    hosts = ds.by_condition("take_turn", "immediate")
    clips = speech_clips(ds)
    cases = precision_cases(quick, conditions)
    load0 = load_average()
    rows = []
    with Clock() as clock:
        for case in cases:
            rows.append(run_precision_case(case, hosts, clips))
    return {"sessions": len(rows), "clips_available": len(clips),
            "conditions": list(conditions), "wall_s": round(clock.wall, 1),
            "load_average": {"before": load0, "after": load_average()},
            "summary": summarise_precision(rows), "cases": rows}


# --- 3. live concurrency ----------------------------------------------------------------------

def live_concurrency(levels: list[tuple[int, int]], out_dir: Path) -> dict:
    """(concurrency, instances) levels through benchmarks/realtime_concurrency.py."""
    from benchmarks import realtime_concurrency as rc
    answer_ms, speak_s, chunk_ms = 400.0, 0.8, 20.0
    script = {"answer_after_ms": answer_ms, "speak_s": speak_s, "pace": 4.0}

    async def go():
        server = rc.ServerProcess(script, out_dir / "realtime_server_log.json")
        speech_end = 0.8
        x = rc.clip(speech_end, speech_end + answer_ms / 1000 + speak_s + 0.3)
        truth = speech_end + answer_ms / 1000
        results = []
        try:
            await rc.one_level(server.base_url, 1, 1, x, truth, script, chunk_ms)  # warm-up
            for c, n in levels:
                results.append(await rc.one_level(server.base_url, n, c, x, truth, script,
                                                  chunk_ms))
        finally:
            sessions = server.stop()
        rc.score(results, sessions)
        return results

    old_key = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"  # a dummy: the server is on 127.0.0.1
    load0 = load_average()
    try:
        results = asyncio.run(go())
    finally:
        if old_key is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old_key
    return {"levels": results, "load_average": {"before": load0, "after": load_average()}}


# --- 4. re-scoring ----------------------------------------------------------------------------

def _fake_openai():
    from tests.fakes import FakeOpenAI

    return FakeOpenAI


def rescore(recorded_dir: Path, dataset: Path, stride: int, limit: int, work: Path) -> dict:
    """Re-score ``recorded_dir`` twice with ``recorded:DIR`` and one judge cache."""
    from pytest_duplexact import pipelines
    from pytest_duplexact.judges import JudgePanel
    from pytest_duplexact.models import resolve_model

    instances = list(load_dataset(dataset, requires=requires).instances[::stride])[:limit]
    opened = Counter()
    real_open = pipelines.open_duplex

    async def counting_open(model, info):
        opened["sessions"] += 1
        return await real_open(model, info)

    old_key = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-fake-benchmark"
    pipelines.open_duplex = counting_open
    passes = []
    cache = work / "rescore-cache"
    vad._load()
    try:
        with _fake_openai()() as server:
            for k in range(2):
                model = resolve_model(f"recorded:{recorded_dir}")
                real_read = model.recording_for
                reads = Counter()

                def counted(instance, _real=real_read, _reads=reads):
                    _reads["recordings"] += 1
                    return _real(instance)

                model.recording_for = counted
                # one --duplexact-cache-dir for both passes, empty before the first
                panel = JudgePanel.from_options(base_url=server.url, cache_dir=cache)
                run_dir = work / f"rescore-{k + 1}"
                h = plugin_harness(model, model.name, run_dir, panel=panel, cache_dir=cache)
                stages = Stages().install(h)
                before_sessions, before_requests = opened["sessions"], server.count
                clock, stream_s, verdicts, errors = run_all(h, instances)
                stages.uninstall()
                passes.append({
                    "pass": k + 1, "instances": len(instances), "stream_s": round(stream_s, 2),
                    "model_sessions_opened": opened["sessions"] - before_sessions,
                    "recordings_read": reads["recordings"],
                    "judge_requests": server.count - before_requests,
                    "total_s": {"wall": round(clock.wall, 3), "cpu": round(clock.cpu, 3)},
                    "x_realtime": {"wall": round(stream_s / clock.wall, 1),
                                   "per_core": round(stream_s / clock.cpu, 1)},
                    "stages_s": stages.split(clock), "immediate_verdicts": dict(verdicts),
                    "error_count": len(errors), "errors": errors[:5]})
    finally:
        pipelines.open_duplex = real_open
        if old_key is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old_key
    return {"passes": passes}


# --- 5. memory -------------------------------------------------------------------------------

def memory(model: str, sizes: tuple[int, ...], work: Path) -> dict:
    """Peak RSS of a whole plugin run (``python -m pytest --duplexact-model=MODEL``) per size,
    each in a fresh process, polled from /proc (_common.plugin_run, as benchmarks/memory.py)."""
    runs = {}
    for n in sizes:
        ds = replicate_dataset(work / f"memory-dataset-{n}", n)
        runs[n] = plugin_run(model, ds, work / f"memory-run-{n}", work / f"memory-run-{n}.log")
    small, big = min(sizes), max(sizes)
    return {"model": model, "runs": runs, "rss_mb": {n: r["peak_rss_mb"] for n, r in runs.items()},
            "growth_mb": round(runs[big]["peak_rss_mb"] - runs[small]["peak_rss_mb"], 1)}


# --- the VAD's quiet-skipping must not change what it finds ----------------------------------

def gate_check(quick: bool, context_ms: tuple[int, ...] | None = None) -> dict:
    """Speech spans with the network skipping quiet stretches vs the network on every frame,
    on every bundled clip and on the oracle's and endpoint's output for every bundled instance
    (every third in --quick). Differences are counted per track and measured in ms."""
    from pytest_duplexact.models import resolve_model
    from pytest_duplexact.models.contract import SessionInfo
    from pytest_duplexact.pipelines import run_instance

    ds = load_dataset(bundled_root(), requires=requires)
    tracks: list[tuple[str, np.ndarray]] = []
    seen = set()
    for inst in ds.instances[:: 3 if quick else 1]:
        for role, clip in inst.clips.items():
            if clip.path not in seen:
                seen.add(clip.path)
                tracks.append((f"clip {clip.path.name}", clip.load()))
    for name in ("oracle", "endpoint"):
        model = resolve_model(name)
        for inst in ds.instances[:: 6 if quick else 1]:
            rec = asyncio.run(run_instance(inst, model, SessionInfo(inst)))
            tracks.append((f"{name} {inst.id}", rec.output))
    context_ms = context_ms or (vad.DEFAULT_PARAMS.skip_quiet_ms,)
    full = replace(vad.DEFAULT_PARAMS, skip_quiet_ms=0)
    out = {"tracks": len(tracks), "audio_s": round(sum(len(x) for _, x in tracks)
                                                   / audio.SAMPLE_RATE, 1), "contexts": {}}
    ref = {}
    with Clock() as base:
        for label, x in tracks:
            ref[label] = vad.speech_spans(x, audio.SAMPLE_RATE, full)
    with Clock() as out_base:
        for label, x in tracks:
            if not label.startswith("clip "):
                vad.speech_spans(x, audio.SAMPLE_RATE, full)
    out["every_frame_cpu_s"] = round(base.cpu, 2)
    for ctx in context_ms:
        params = replace(vad.DEFAULT_PARAMS, skip_quiet_ms=ctx)
        differ, merged_differ, worst = [], [], 0.0
        with Clock() as clock:
            got = {label: vad.speech_spans(x, audio.SAMPLE_RATE, params) for label, x in tracks}
        with Clock() as outputs:  # the output tracks alone (the clips are mostly speech)
            for label, x in tracks:
                if not label.startswith("clip "):
                    vad.speech_spans(x, audio.SAMPLE_RATE, params)
        for label, spans in got.items():
            a = ref[label]
            if segmentation.merge_spans(a) != segmentation.merge_spans(spans):
                merged_differ.append(label)
            if len(a) != len(spans):
                differ.append(f"{label}: {len(a)} spans vs {len(spans)}")
                continue
            d = max((max(abs(p.start - q.start), abs(p.end - q.end)) for p, q in zip(a, spans)),
                    default=0.0)
            if d > 1e-9:
                differ.append(f"{label}: edges up to {d * 1000:.1f} ms apart")
                worst = max(worst, d)
        out["contexts"][ctx] = {"tracks_differing_raw_spans": len(differ), "examples": differ[:10],
                                "tracks_differing_segments": len(merged_differ),
                                "max_edge_difference_ms": round(worst * 1000, 1),
                                "cpu_s": round(clock.cpu, 2),
                                "speedup_all_tracks": round(base.cpu / max(clock.cpu, 1e-9), 2),
                                "speedup_output_tracks": round(out_base.cpu / max(outputs.cpu,
                                                                                  1e-9), 2)}
    return out


# --- the report -------------------------------------------------------------------------------

def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "MISSED")


def targets(report: dict) -> list[dict]:
    rows = []
    tp = report.get("throughput", {})
    if "oracle" in tp:
        v = tp["oracle"]["total_over_vad"]
        rows.append({"target": "oracle total / VAD time <= 1.5", "value": v,
                     "met": v is not None and v <= TARGETS["oracle_total_over_vad"]})
    if "oracle" in tp:
        v = tp["oracle"]["x_realtime"]["per_core"]
        rows.append({"target": "oracle >= 300x real time per core", "value": v,
                     "met": v >= TARGETS["oracle_x_realtime_per_core"]})
    bk = report.get("vad_backends")
    if bk:
        rows.append({"target": "VAD onnx = torch spans on every clip, grid track, model output",
                     "value": f"{bk['tracks_differing']} of {bk['tracks']} differ",
                     "met": bk["tracks_differing"] == 0})
    if "silent" in tp:
        v = tp["silent"]["x_realtime"]["per_core"]
        rows.append({"target": "silent >= 2000x real time per core", "value": v,
                     "met": v >= TARGETS["silent_x_realtime_per_core"]})
    pr = report.get("precision", {}).get("summary", {}).get("clean")
    if pr:
        on, off = pr["onset_ms"], pr["offset_ms_bias_corrected"]
        med, p95 = TARGETS["onset_median_ms"], TARGETS["onset_p95_ms"]
        rows.append({"target": f"clean onset |err| median <= {med:g} ms, p95 <= {p95:g} ms",
                     "value": f"{on['median']} / {on['p95']} ms",
                     "met": on["median"] <= med and on["p95"] <= p95})
        rows.append({"target": f"clean offset (bias {pr['offset_bias_ms']} ms removed) same",
                     "value": f"{off['median']} / {off['p95']} ms",
                     "met": off["median"] <= med and off["p95"] <= p95})
    grid = report.get("noise_grid", {}).get("summary", {})
    for cond in ("white-35", "babble-35"):
        g = grid.get(cond)
        if not g:
            continue
        off, gap = g["offset_ms"], g["gap_error_ms"]
        lim = TARGETS["noise_p95_ms"]
        rows.append({"target": f"{cond}: offset and gap |err| p95 <= {lim:g} ms",
                     "value": f"{off['p95']} / {gap['p95']} ms",
                     "met": None not in (off["p95"], gap["p95"]) and off["p95"] <= lim
                     and gap["p95"] <= lim})
        f50 = [v for k, v in g["verdict_flips"].items() if k.endswith("+-50ms")]
        rows.append({"target": f"{cond}: no verdict flip at +-50 ms from a rule edge",
                     "value": ", ".join(f"{v['flipped']}/{v['n']}" for v in f50),
                     "met": all(v["flipped"] == 0 for v in f50)})
    for cond, want in GRID_TARGETS.items():
        g = grid.get(cond)
        if g:
            rows.append(grid_target(cond, g, want))
    live = {lv["concurrency"]: lv for lv in report.get("live", {}).get("levels", [])}
    if 16 in live:
        v = live[16]["ratio"]
        rows.append({"target": "live wall / ideal <= 1.1 at 16 sessions", "value": v,
                     "met": v <= TARGETS["live_wall_over_ideal_16"]})
    rs = report.get("rescore", {}).get("passes")
    if rs:
        warm = rs[-1]
        calls = sum(p["model_sessions_opened"] for p in rs) + warm["judge_requests"]
        rows.append({"target": "re-score: 0 model sessions, 0 judge requests when warm",
                     "value": f"{sum(p['model_sessions_opened'] for p in rs)} / "
                              f"{warm['judge_requests']}", "met": calls == 0})
        v = warm["x_realtime"]["per_core"]
        rows.append({"target": "re-score >= 1000x real time (per core)", "value": v,
                     "met": v >= TARGETS["rescore_x_realtime"]})
    mem = report.get("memory")
    if mem:
        v = mem["growth_mb"]
        rows.append({"target": "peak RSS at 300 within 50 MB of 30", "value": v,
                     "met": v <= TARGETS["memory_growth_mb"]})
    return rows


def grid_target(cond: str, g: dict, want: dict) -> dict:
    """One row of ``GRID_TARGETS`` against the grid's summary for ``cond``."""
    parts, values, met = [], [], True
    for stat in ("median", "p95"):
        for key, lim in want.get(stat, {}).items():
            v = g[key][stat]
            parts.append(f"{key.split('_')[0]} {stat} <= {lim} ms")
            values.append(f"{v}")
            met = met and v is not None and v <= lim
    parts.append(f"joined <= {want['joined']}")
    values.append(str(g["joined_into_one_segment"]))
    met = met and g["joined_into_one_segment"] <= want["joined"]
    if want.get("no_flips_50"):
        f50 = [v for k, v in g["verdict_flips"].items() if k.endswith("+-50ms")]
        parts.append("no flip at +-50 ms")
        values.append(", ".join(f"{v['flipped']}/{v['n']}" for v in f50))
        met = met and all(v["flipped"] == 0 for v in f50)
    return {"target": f"{cond}: " + ", ".join(parts), "value": " / ".join(values), "met": met}


def precision_lines(pr: dict, title: str) -> list[str]:
    lines = [f"\n{title} ({pr['sessions']} sessions; |error| ms median / p95 / max)"]
    for snr, s in pr["summary"].items():
        on, off, offc, gap = (s["onset_ms"], s["offset_ms"], s["offset_ms_bias_corrected"],
                              s["gap_error_ms"])
        lines.append(f"  {snr:<9} onset {on['median']}/{on['p95']}/{on['max']} "
                     f"(signed median {on['signed_median']})  offset {off['median']}/"
                     f"{off['p95']}/{off['max']} (bias {s['offset_bias_ms']}; corrected "
                     f"{offc['median']}/{offc['p95']}/{offc['max']})  gap "
                     f"{gap['median']}/{gap['p95']}/{gap['max']}  missed {s['missed']}/"
                     f"{s['utterances']}, joined {s['joined_into_one_segment']}, false "
                     f"segments {s['false_alarm_segments']}")
        lines.append("         by speech length, onset / offset |err| median/p95: " + ", ".join(
            f"{k} (n={v['onset_ms']['n']}) {v['onset_ms']['median']}/{v['onset_ms']['p95']}"
            f" / {v['offset_ms']['median']}/{v['offset_ms']['p95']}"
            for k, v in s["by_speech_length"].items()))
        lines.append("         flips: " + ", ".join(
            f"{k} {v['flipped']}/{v['n']}" for k, v in s["verdict_flips"].items()))
    return lines


def table(report: dict) -> str:
    lines = [f"machine: {report['machine'].get('cpus')} cpus, load average "
             f"{report['machine']['load_average']} at start, {load_average()} at end"]
    tp = report.get("throughput", {})
    if tp:
        lines.append("\n1. stepped throughput (per core = per CPU-second; wall in brackets)")
        lines.append(f"{'model':<9}{'inst':>5}{'stream s':>10}{'inst/s':>16}{'x real time':>18}"
                     f"{'total/VAD':>11}   CPU s: pipeline write vad transcr seg score journal "
                     "other")
        for m, r in tp.items():
            c = r["stages_s"]["cpu"]
            lines.append(
                f"{m:<9}{r['instances']:>5}{r['stream_s']:>10.0f}"
                f"{r['instances_per_s']['per_core']:>8.1f} ({r['instances_per_s']['wall']:>5.1f})"
                f"{r['x_realtime']['per_core']:>9.0f} ({r['x_realtime']['wall']:>6.0f})"
                f"{r['total_over_vad'] or float('nan'):>11.2f}   "
                + " ".join(f"{c[k]:.2f}" for k in ("pipeline", "write", "vad", "transcription",
                                                   "segmentation", "scoring", "journal",
                                                   "other")))
            if "repeats_x_realtime_per_core" in r:
                lines.append(f"{'':9}x real time per core over {len(r['repeats_x_realtime_per_core'])}"
                             f" runs: {r['repeats_x_realtime_per_core']} (the median shown)")
            fl = r.get("floor")
            if fl:
                lines.append(f"{'':9}silero network alone {fl['silero_network_x_realtime_per_core']}"
                             f"x, VAD as run {fl['vad_x_realtime_per_core']}x real time on "
                             f"{fl['recordings']} of its outputs; startup "
                             f"{r['startup_s']['cpu']:.1f} CPU s; errors {r['error_count']}")
    for key, title in (("precision", "2. timing precision"),
                       ("noise_grid", "2b. timing on the noise grid")):
        if report.get(key):
            lines.extend(precision_lines(report[key], title))
    live = report.get("live")
    if live:
        lines.append("\n3. live concurrency (loopback fake realtime server)")
        for lv in live["levels"]:
            a = lv["onset_error_vs_script_ms"]
            lines.append(f"  {lv['concurrency']:>3} sessions x {lv['instances']:>3}: wall/ideal "
                         f"{lv['ratio']:.3f}, |onset err| {a['median']}/{a['p95']}/{a['max']} "
                         f"ms, input lag {lv['max_input_lag_ms']} ms, errors {len(lv['errors'])}")
    gate = report.get("vad_gate")
    if gate:
        for ctx, g in gate["contexts"].items():
            lines.append(f"\nVAD skipping quiet stretches (>{ctx} ms from louder audio) vs every "
                         f"frame, {gate['tracks']} tracks ({gate['audio_s']} s): segments differ "
                         f"on {g['tracks_differing_segments']}, raw spans on "
                         f"{g['tracks_differing_raw_spans']}; VAD {g['speedup_output_tracks']}x "
                         f"faster on model outputs, {g['speedup_all_tracks']}x on all tracks")
            for ex in g["examples"]:
                lines.append(f"    {ex}")
    if report.get("vad_backends"):
        lines.extend(vad_backends.lines(report["vad_backends"]))
    if report.get("run_size"):
        lines.extend(run_size.lines(report["run_size"]))
    if report.get("asr_noise"):
        lines.extend(asr_accuracy.noise_lines(report["asr_noise"]))
    rs = report.get("rescore")
    if rs:
        lines.append("\n4. re-scoring with recorded:DIR (judges on the fake OpenAI server)")
        for p in rs["passes"]:
            lines.append(f"  pass {p['pass']}: {p['instances']} instances, model sessions "
                         f"{p['model_sessions_opened']}, recordings read {p['recordings_read']},"
                         f" judge requests {p['judge_requests']}, {p['x_realtime']['per_core']}x "
                         f"real time per core ({p['x_realtime']['wall']}x wall), VAD CPU "
                         f"{p['stages_s']['cpu']['vad']:.2f} of {p['total_s']['cpu']:.2f} s")
    mem = report.get("memory")
    if mem:
        lines.append(f"\n5. memory ({mem['model']}): peak RSS {mem['rss_mb']} MB for "
                     f"{list(mem['rss_mb'])} instances; growth {mem['growth_mb']} MB")
    lines.append("\ntargets")
    for t in report["targets"]:
        lines.append(f"  {verdict(t['met']):<7} {t['target']}: {t['value']}")
    return "\n".join(lines)


def main(args) -> dict:
    report = {"benchmark": "harness", "quick": args.quick, "machine": machine()}
    work = Path(tempfile.mkdtemp(prefix="duplexact-bench-"))
    size = 300
    ds_dir = replicate_dataset(work / "dataset", size if not args.quick else 72)
    # quick: one instance per condition (the manifest lists each condition's three together)
    stride, limit = (3, 24) if args.quick else (1, size)
    parts = set(args.parts)
    timing = report["part_wall_s"] = {}

    def part(name: str, run) -> None:
        if name in parts:
            w = time.perf_counter()
            run()
            timing[name] = round(time.perf_counter() - w, 1)
            print(f"  {name}: done in {timing[name]} s", file=sys.stderr)

    def throughput() -> None:
        report["throughput"] = {}
        for m in MODELS:
            # silent is cheap: all of the set in --quick; and the most disturbed by other
            # load: repeated in a full run, the median kept
            lim, st = (72, 1) if m == "silent" and args.quick else (limit, stride)
            reps = 3 if m == "silent" and not args.quick else 1
            runs = [spawn_worker(m, ds_dir, work / (f"run-{m}" + ("" if k == 0 else f"-{k}")),
                                 lim, st, 6 if args.quick else 30) for k in range(reps)]
            runs.sort(key=lambda r: r["total_s"]["cpu"])
            report["throughput"][m] = runs[len(runs) // 2]
            if reps > 1:
                report["throughput"][m]["repeats_x_realtime_per_core"] = [
                    r["x_realtime"]["per_core"] for r in runs]

    def live() -> None:
        levels = [(1, 4), (16, 16)] if args.quick else [(1, 32), (4, 32), (16, 32), (32, 32)]
        report["live"] = live_concurrency(levels, work)

    def rescoring() -> None:
        if not (work / "run-oracle").is_dir():
            spawn_worker("oracle", ds_dir, work / "run-oracle", limit, stride, 0)
        report["rescore"] = rescore(work / "run-oracle", ds_dir, stride, limit, work)

    part("throughput", throughput)
    part("precision", lambda: report.update(precision=precision(args.quick)))
    part("noise", lambda: report.update(noise_grid=precision(args.quick, degrade.GRID)))
    part("live", live)
    part("gate", lambda: report.update(vad_gate=gate_check(args.quick)))
    part("backends", lambda: report.update(vad_backends=vad_backends.compare(args.quick)))
    part("size", lambda: report.update(run_size=run_size.measure(work)))
    part("asr", lambda: report.update(asr_noise=asr_accuracy.noise_grid(
        ("clean", "white-35") if args.quick else ("clean", "white-45", "white-35", "babble-45",
                                                  "babble-35", "codec"))))
    part("rescore", rescoring)
    part("memory", lambda: report.update(memory=memory("silent" if args.quick else "oracle",
                                                       (30, size), work)))
    report["targets"] = targets(report)
    report["machine"]["load_average_end"] = load_average()
    report["work_dir"] = str(work)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller versions of each part "
                        "(~2 min)")
    parser.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks"
                        / "harness.json")
    parser.add_argument("--parts", nargs="+", default=["throughput", "precision", "live", "gate",
                                                       "noise", "backends", "size", "asr",
                                                       "rescore",
                                                       "memory"],
                        help="which parts to run (default: all)")
    # internal: one throughput run in a fresh process
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=300, help=argparse.SUPPRESS)
    parser.add_argument("--stride", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--floor-sample", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = throughput_worker(args)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        sys.exit(0)
    report = main(args)
    print(table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
