"""A Recording on disk (docs/models.md, "Recording layout"), so a run can be listened to,
re-scored, and replayed with ``--duplexact-model=recorded:DIR``.

One folder per trial:

- ``input.flac``  what was sent to the model (16 kHz mono, 16-bit FLAC: lossless)
- ``output.flac`` what a listener heard from it, on the same clock
- ``recording.json`` everything else (format below)
- ``channel_input.flac`` under ``--duplexact-channel`` only: what the model heard through the
  channel (``input`` stays the clean user track), so ``recorded:DIR`` re-scores exactly

``audio_format="wav"`` (``--duplexact-audio-format=wav``) writes ``input.wav`` /
``output.wav`` (PCM-16) instead: the same samples, ~8x the size (an output track is mostly
digital silence). Readers take either; a folder holding both takes the FLAC.

A folder with only ``input.wav`` and ``output.wav`` (the Full-Duplex-Bench layout; FLAC also
works) loads too: no transcript, no cue, any sample rate (resampled to 16 kHz).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import soundfile as sf

from . import audio
from .atomic import write_text
from .recording import Recording
from .timeline import Cue, Word

AUDIO_FORMATS = ("flac", "wav")  # in the order readers look for them
DEFAULT_AUDIO_FORMAT = "flac"
TRACKS = ("input", "output", "channel_input")
INPUT_FILE = "input.wav"  # the WAV names (Full-Duplex-Bench); track_file finds either format
OUTPUT_FILE = "output.wav"
RECORDING_FILE = "recording.json"
FORMAT_NAME = "duplexact-recording"
FORMAT_VERSION = 1


class RecordingFormatError(ValueError):
    """A saved recording cannot be read; the message names the file and the field."""


def recording_to_dict(rec: Recording, instance_id: str | None = None,
                      meta: dict | None = None) -> dict:
    d = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "instance": instance_id,
        "sample_rate": rec.sample_rate,
        "input_samples": int(len(rec.input)),
        "output_samples": int(len(rec.output)),
        "transcript": [{"start": w.start, "end": w.end, "text": w.text} for w in rec.transcript],
        "cue": None if rec.cue is None else {"start": rec.cue.start, "end": rec.cue.end,
                                             "forced": rec.cue.forced},
        "user_sent_until": rec.user_sent_until,
        "events": [[t, what] for t, what in rec.events],
    }
    if rec.channel_input is not None:  # only under a channel: clean trials keep their bytes
        d["channel_input_samples"] = int(len(rec.channel_input))
    if meta:
        d["meta"] = meta
    return d


def check_audio_format(audio_format: str) -> str:
    if audio_format not in AUDIO_FORMATS:
        raise ValueError(f"audio format {audio_format!r}: use one of {', '.join(AUDIO_FORMATS)}")
    return audio_format


def track_file(folder: Path | str, track: str) -> Path:
    """The file holding ``track`` (input or output) in ``folder``: ``<track>.flac``, else
    ``<track>.wav``; the WAV path when neither exists (what an error names)."""
    folder = Path(folder)
    for fmt in AUDIO_FORMATS:
        path = folder / f"{track}.{fmt}"
        if path.is_file():
            return path
    return folder / f"{track}.wav"


def save_recording(rec: Recording, folder: Path | str, *, instance_id: str | None = None,
                   meta: dict | None = None, audio_format: str = DEFAULT_AUDIO_FORMAT) -> Path:
    """Write the trial to ``folder`` (created); each file is written whole and renamed. Tracks
    of the other audio format left by an earlier attempt are removed first, so a reader never
    takes a stale track for the new one."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    check_audio_format(audio_format)
    for track in TRACKS:
        for fmt in AUDIO_FORMATS:
            if fmt != audio_format:
                (folder / f"{track}.{fmt}").unlink(missing_ok=True)
    tracks = [("input", rec.input), ("output", rec.output)]
    if rec.channel_input is not None:
        tracks.append(("channel_input", rec.channel_input))
    else:  # a stale channelled track of an earlier attempt is not this trial's
        for fmt in AUDIO_FORMATS:
            (folder / f"channel_input.{fmt}").unlink(missing_ok=True)
    for track, samples in tracks:
        # one float -> PCM-16 rule for both formats: a FLAC and a WAV of a trial are equal
        audio.write(folder / f"{track}.{audio_format}", audio.to_pcm16(samples), rec.sample_rate)
    write_text(folder / RECORDING_FILE, json.dumps(recording_to_dict(rec, instance_id, meta),
                                                   indent=1, ensure_ascii=False) + "\n")
    return folder


def _read_track(path: Path) -> np.ndarray:
    if not path.is_file():
        raise RecordingFormatError(f"{path.parent / path.stem}.flac / {path.stem}.wav: missing")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:
        raise RecordingFormatError(f"{path}: unreadable audio: {e}") from None
    if data.shape[1] != 1:
        raise RecordingFormatError(f"{path}: {data.shape[1]} channels, expected mono")
    return audio.resample(data[:, 0], sr, audio.SAMPLE_RATE)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _parse(meta: dict, where: Path) -> tuple[tuple[Word, ...], Cue | None, float | None, list]:
    def bad(field: str, msg: str):
        return RecordingFormatError(f"{where}: field '{field}' {msg}")

    if meta.get("format") != FORMAT_NAME:
        raise bad("format", f"must be {FORMAT_NAME!r}")
    if meta.get("version") != FORMAT_VERSION:
        raise bad("version", f"unsupported version {meta.get('version')!r}; this release "
                  f"reads version {FORMAT_VERSION}")
    words = []
    raw = meta.get("transcript") or []
    if not isinstance(raw, list):
        raise bad("transcript", "must be a list of {start, end, text}")
    for k, w in enumerate(raw):
        if not (isinstance(w, dict) and _number(w.get("start")) and _number(w.get("end"))
                and isinstance(w.get("text"), str)):
            raise bad(f"transcript[{k}]", "must have numeric start, end and string text")
        words.append(Word(float(w["start"]), float(w["end"]), w["text"]))
    cue = meta.get("cue")
    if cue is not None:
        if not (isinstance(cue, dict) and _number(cue.get("start")) and _number(cue.get("end"))):
            raise bad("cue", "must be null or {start, end, forced}")
        cue = Cue(float(cue["start"]), float(cue["end"]), bool(cue.get("forced", False)))
    until = meta.get("user_sent_until")
    if until is not None and not _number(until):
        raise bad("user_sent_until", "must be null or a number of seconds")
    events = []
    for k, e in enumerate(meta.get("events") or []):
        if not (isinstance(e, list) and len(e) == 2 and _number(e[0]) and isinstance(e[1], str)):
            raise bad(f"events[{k}]", "must be [seconds, text]")
        events.append((float(e[0]), e[1]))
    return tuple(words), cue, None if until is None else float(until), events


def read_instance_id(folder: Path | str) -> str | None:
    """The instance id stored in ``recording.json`` (None for other layouts)."""
    path = Path(folder) / RECORDING_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("instance")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def has_metadata(folder: Path | str) -> bool:
    return (Path(folder) / RECORDING_FILE).is_file()


def load_recording(folder: Path | str) -> Recording:
    """Read a folder written by ``save_recording`` or a Full-Duplex-Bench-style folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RecordingFormatError(f"{folder}: not a folder")
    inp = _read_track(track_file(folder, "input"))
    out = _read_track(track_file(folder, "output"))
    meta_path = folder / RECORDING_FILE
    if not meta_path.is_file():
        return Recording(input=inp, output=out)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RecordingFormatError(f"{meta_path}: not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise RecordingFormatError(f"{meta_path}: must be a JSON object")
    words, cue, until, events = _parse(meta, meta_path)
    heard = None
    if meta.get("channel_input_samples") is not None:
        heard = _read_track(track_file(folder, "channel_input"))
    return Recording(input=inp, output=out, transcript=words, cue=cue, user_sent_until=until,
                     events=events, channel_input=heard)
