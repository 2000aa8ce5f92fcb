"""The real-audio harness's shared pieces: where the published model outputs are, the skip
when they are absent, and the measurements tests/realaudio and benchmarks/real_audio.py make.

Layout under ``$DUPLEXACT_REALAUDIO_DIR`` (docs/timeline.md, "Real model audio"):

    <owner>+<name>/        a checkout (or a ``git archive`` of it) of a repository holding
                           published model outputs

Each output is a folder with ``output.wav`` (the model's channel), ``input.wav`` (the user's)
and ``output.json`` (the published word timings: ``{"chunks": [{"text", "timestamp": [s,
e]}]}``), plus the benchmark's annotation of the task (``turn_taking.json``, ``pause.json``,
``interrupt.json``): Full-Duplex-Bench v1's layout. Their licences (e.g. CC BY-NC) do not let
this repository hold them: nothing here copies, caches or writes them anywhere.

Per output it measures:

- **onset**: our timeline's first onset (the package's own path, as ``recorded:`` builds it:
  ``load_recording`` then ``build_timeline``) against the audio itself: the first loud sample
  (``LOUD_DBFS``), and what comes before it (digital silence, or the lead-in's peak);
- **closed pauses**: stretches of ``PAUSE_S`` or more, ``QUIET_BELOW_DB`` under the speech
  around them, that one of our raw speech spans covers;
- **published words over silence**: a published word whose start has no loud audio near it
  (the published timings' own errors);
- **verdicts**: the task read as DuplexAct instances (take_turn after the user's turn or the
  interruption, wait through the pause), scored by the same rules on our timeline and on a
  timeline made of the published words, ours with its borderline flips (rules/borderline.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data.annotations import Annotations, Instance
from pytest_duplexact.data.recording_io import load_recording
from pytest_duplexact.data.results import ImmediateResult
from pytest_duplexact.data.timeline import Segment, Span, Timeline, Word
from pytest_duplexact.listen.segmentation import MERGE_GAP_S, build_timeline, join_words
from pytest_duplexact.rules import scoring, take_turn, wait

REALAUDIO_ENV = "DUPLEXACT_REALAUDIO_DIR"
# the repositories whose published outputs the harness reads, and where they lie in each
SOURCES = {"DanielLin94144/Full-Duplex-Bench": "v1_v1.5/evaluation/example_data"}

LOUD_DBFS = -40.0  # a sample this loud is speech or a click, never a noise floor
SILENT = 1.5 / 32768  # digital silence: within one 16-bit step of zero
FRAME_S = 0.01  # the envelope's frames (closed pauses, words over silence)
PAUSE_S = 0.3  # the merge gap: a pause this long is one the timeline keeps
QUIET_BELOW_DB = 20.0
WORD_NEAR_S = (0.05, 0.25)  # a word's start has loud audio this far before / after it
RISE_S = 0.03  # the speech's own rise before its first loud sample: not the lead-in
QUIET_LEAD_DBFS = -60.0  # a lead-in quieter than this is near-silent (codec dither)
ONSET_TOLERANCE_S = 0.05  # our first onset vs the first loud sample, after a quiet lead-in


def realaudio_root() -> Path | None:
    value = os.environ.get(REALAUDIO_ENV, "")
    return Path(value) if value else None


def output_folders(root: Path) -> list[Path]:
    """Every output folder of every source present under ``root``."""
    found = []
    for repo, under in SOURCES.items():
        base = root / repo.replace("/", "+") / under
        if base.is_dir():
            found += sorted(p.parent for p in base.rglob("output.wav")
                            if (p.parent / "output.json").is_file())
    return found


def outputs_or_skip() -> list[Path]:
    root = realaudio_root()
    if root is None:
        pytest.skip(f"{REALAUDIO_ENV} is not set: it names a folder holding checkouts of "
                    "published model outputs (<owner>+<name>/), e.g. "
                    "DanielLin94144+Full-Duplex-Bench/ (docs/timeline.md, 'Real model audio')")
    found = output_folders(root)
    if not found:
        pytest.skip(f"{REALAUDIO_ENV}={root} holds no outputs of "
                    + ", ".join(f"{r} (under {u})" for r, u in SOURCES.items()))
    return found


def name_of(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}"


# --- the audio itself -------------------------------------------------------------------------

def _db(x: np.ndarray) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + 1e-12))


def envelope(x: np.ndarray, sr: int) -> np.ndarray:
    """RMS level of each FRAME_S frame, dBFS."""
    f = int(FRAME_S * sr)
    n = len(x) // f
    frames = x[:n * f].astype(np.float64).reshape(n, f)
    return 20 * np.log10(np.sqrt((frames ** 2).mean(axis=1)) + 1e-12)


@dataclass(frozen=True)
class AudioOnset:
    first_loud: float | None  # s: the first sample at LOUD_DBFS or above
    silent_until: float  # s: where digital silence before it ends (0.0: none)
    lead_in_peak_dbfs: float | None  # the loudest sample between the two; None: all silent

    @property
    def quiet_lead_in(self) -> bool:
        """Digital silence, or nothing louder than QUIET_LEAD_DBFS, before the speech's rise
        (the issue's "silent or near-silent before the model speaks")."""
        return self.first_loud is not None and (self.lead_in_peak_dbfs is None
                                                or self.lead_in_peak_dbfs < QUIET_LEAD_DBFS)

    def lead_in(self) -> str:
        if self.first_loud is None:
            return "no loud audio"
        if self.lead_in_peak_dbfs is None:
            return "digital silence"
        return f"peak {self.lead_in_peak_dbfs:.0f} dBFS from {self.silent_until:.2f} s"


def audio_onset(x: np.ndarray, sr: int) -> AudioOnset:
    loud = np.flatnonzero(np.abs(x) >= 10 ** (LOUD_DBFS / 20))
    if not len(loud):
        return AudioOnset(None, 0.0, None)
    first = int(loud[0])
    audible = np.flatnonzero(np.abs(x[:first]) > SILENT)
    if not len(audible):
        return AudioOnset(first / sr, first / sr, None)
    # the last stretch of digital silence before the loud sample: 10 ms or more of it
    quiet = np.abs(x[:first]) <= SILENT
    run, end = 0, 0
    need = int(0.01 * sr)
    for i in range(first - 1, -1, -1):
        run = run + 1 if quiet[i] else 0
        if run >= need:
            end = i + run
            break
    lead = x[end:max(end, first - int(RISE_S * sr))]  # the speech's own rise left out
    peak = float(20 * np.log10(np.abs(lead).max() + 1e-12)) if len(lead) else None
    return AudioOnset(first / sr, end / sr, peak)


def closed_pauses(x: np.ndarray, sr: int, speech: tuple[Span, ...]) -> list[Span]:
    """Stretches of PAUSE_S or more inside one raw speech span, QUIET_BELOW_DB under the
    span's own speech level (the median of its frames at most 30 dB under its loudest)."""
    env = envelope(x, sr)
    out = []
    for sp in speech:
        a, b = int(sp.start / FRAME_S), min(len(env), int(np.ceil(sp.end / FRAME_S)))
        if b - a < 2:
            continue
        seg = env[a:b]
        voiced = seg[seg >= seg.max() - 30]
        quiet = seg < np.median(voiced) - QUIET_BELOW_DB
        k = 0
        while k < len(quiet):
            if not quiet[k]:
                k += 1
                continue
            j = k
            while j < len(quiet) and quiet[j]:
                j += 1
            if (j - k) * FRAME_S >= PAUSE_S - 1e-9 and k > 0 and j < len(quiet):
                out.append(Span((a + k) * FRAME_S, (a + j) * FRAME_S))
            k = j
    return out


# --- the published timings --------------------------------------------------------------------

def published_words(folder: Path) -> tuple[Word, ...]:
    chunks = json.loads((folder / "output.json").read_text(encoding="utf-8"))["chunks"]
    return tuple(Word(float(c["timestamp"][0]), float(c["timestamp"][1]), c["text"].strip())
                 for c in chunks if c.get("text", "").strip())


def words_over_silence(words, x: np.ndarray, sr: int) -> list[Word]:
    """Published words with no loud audio near their start."""
    env = envelope(x, sr)
    bad = []
    for w in words:
        a = max(0, int((w.start - WORD_NEAR_S[0]) / FRAME_S))
        b = min(len(env), int((w.start + WORD_NEAR_S[1]) / FRAME_S) + 1)
        if b <= a or env[a:b].max() < LOUD_DBFS:
            bad.append(w)
    return bad


def words_timeline(words, duration: float) -> Timeline:
    """The published words as a timeline: words less than the merge gap apart are one
    segment, as the timeline groups speech."""
    groups: list[list[Word]] = []
    for w in sorted(words, key=lambda w: w.start):
        if groups and w.start - groups[-1][-1].end < MERGE_GAP_S:
            groups[-1].append(w)
        else:
            groups.append([w])
    segs = tuple(Segment(g[0].start, max(w.end for w in g), join_words(g), tuple(g))
                 for g in groups)
    return Timeline(segs, duration)


# --- the task as DuplexAct instances ----------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """One verdict: a rule's condition and its annotations."""

    key: str  # action.condition
    ann: Annotations

    def _rule(self):
        action, condition = self.key.split(".")
        return {"take_turn": take_turn, "wait": wait}[action], condition

    def result(self, tl: Timeline) -> ImmediateResult:
        """The immediate result as a run scores it (its borderline flips included)."""
        action, condition = self.key.split(".")
        inst = Instance(f"realaudio-{self.key}", action, condition, "unspecified", "real",
                        self.ann, {}, {})
        return scoring.score(inst, tl).immediate

    def verdict(self, tl: Timeline) -> str:
        return self.result(tl).verdict.value

    def window(self) -> tuple[float, float]:
        rule, condition = self._rule()
        return rule.window(self.ann, condition)


def _json(folder: Path, name: str):
    path = folder / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def checks(folder: Path, duration: float) -> list[Check]:
    """The task of a Full-Duplex-Bench output folder read as DuplexAct verdicts: after the
    user's turn (turn_taking.json: its start is the end of the user's turn) take_turn; through
    the user's pause (pause.json) wait; after the interruption (interrupt.json) take_turn,
    where the published words start (they transcribe only the response)."""
    out = []
    if (tt := _json(folder, "turn_taking.json")):
        end = float(tt[0]["timestamp"][0])
        ann = Annotations(user_start=0.0, user_end=end)
        out += [Check("take_turn.immediate", ann), Check("take_turn.delayed", ann)]
    if (pause := _json(folder, "pause.json")):
        lo, hi = (float(t) for t in pause[0]["timestamp"])
        out.append(Check("wait.inter_sentential_pause",
                         Annotations(user_start=0.0, user_end=duration, pause_start=lo,
                                     pause_end=hi)))
    if (intr := _json(folder, "interrupt.json")):
        lo, hi = (float(t) for t in intr[0]["timestamp"])
        ann = Annotations(user_start=lo, user_end=hi)
        out.append(Check("take_turn.delayed", ann))
    return out


# --- one output, measured ---------------------------------------------------------------------

@dataclass
class Measured:
    name: str
    onset: AudioOnset
    our_onset: float | None
    published_onset: float | None
    over_silence: list[Word]
    closed: list[Span]
    # (check, ours, published) per verdict
    verdicts: list[tuple["Check", str, str]] = field(default_factory=list)
    borderline: dict[str, tuple[dict, ...]] = field(default_factory=dict)  # ours, by check
    segments: int = 0

    @property
    def onset_error_ms(self) -> float | None:
        if self.our_onset is None or self.onset.first_loud is None:
            return None
        return 1000 * (self.our_onset - self.onset.first_loud)

    def comparable(self, check: "Check") -> bool:
        """The published words agree with the audio where this verdict reads them: none of
        them lies over silence within a second of the rule's window."""
        lo, hi = check.window()
        return not any(w.end > lo - 1.0 and w.start < hi + 1.0 for w in self.over_silence)


def measure(folder: Path, transcriber) -> Measured:
    rec = load_recording(folder)  # what recorded: reads (the output resampled to 16 kHz)
    tl = build_timeline(rec, transcriber)
    x, sr = rec.output, rec.sample_rate
    words = published_words(folder)
    pub = words_timeline(words, rec.duration)
    m = Measured(name_of(folder), audio_onset(x, sr),
                 tl.segments[0].start if tl.segments else None,
                 words[0].start if words else None, words_over_silence(words, x, sr),
                 closed_pauses(x, sr, tl.speech_spans), segments=len(tl.segments))
    for c in checks(folder, rec.duration):
        ours = c.result(tl)
        m.verdicts.append((c, ours.verdict.value, c.verdict(pub)))
        m.borderline[c.key] = ours.borderline or ()
    return m
