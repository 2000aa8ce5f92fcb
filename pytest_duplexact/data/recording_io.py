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
from pathlib import Path

import numpy as np
import soundfile as sf

from . import audio
from .atomic import write_text
from .instance import MAX_CLIP_S
from .recording import Recording
from .results import finite_number
from .timeline import Cue, Word

AUDIO_FORMATS = ("flac", "wav")  # in the order readers look for them
DEFAULT_AUDIO_FORMAT = "flac"
TRACKS = ("input", "output", "channel_input")
INPUT_FILE = "input.wav"  # the WAV names (Full-Duplex-Bench); track_file finds either format
OUTPUT_FILE = "output.wav"
RECORDING_FILE = "recording.json"
FORMAT_NAME = "duplexact-recording"
FORMAT_VERSION = 1
# the longest track a recording may hold, checked from its header before decoding: the
# limit of one clip of a dataset (a longer one is a data error, and decodes to gigabytes)
MAX_TRACK_S = MAX_CLIP_S
MAX_DECODED = int(MAX_TRACK_S * 48_000)  # samples: ten minutes at 48 kHz
MAX_METADATA_BYTES = 64 * 2**20  # a transcript of hours is a few MB


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


def _read_track(path: Path, expected: tuple[str, int, int] | None = None) -> np.ndarray:
    """One track, resampled to 16 kHz. Its length is taken from the header and checked
    before anything is decoded (a few hundred kB of FLAC can hold hours of silence), and
    decoding stops at the limit whatever the header says. ``expected``: (the recording.json
    field, samples, sample rate) the track must have."""
    if not path.is_file():
        raise RecordingFormatError(f"{path.parent / path.stem}.flac / {path.stem}.wav: missing")
    try:
        info = sf.info(str(path))
    except Exception as e:  # not audio libsndfile reads (soundfile may raise anything)
        raise RecordingFormatError(f"{path}: unreadable audio: {' '.join(str(e).split())[:120]}") from None
    if info.channels != 1:
        raise RecordingFormatError(f"{path}: {info.channels} channels, expected mono")
    if info.samplerate <= 0:
        raise RecordingFormatError(f"{path}: unreadable audio (header: {info.samplerate} Hz)")
    if info.frames / info.samplerate > MAX_TRACK_S:
        raise RecordingFormatError(
            f"{path}: lasts {info.frames / info.samplerate:.0f} s (from its header), over the "
            f"{MAX_TRACK_S:.0f} s limit of one track")
    if expected is not None and (info.frames, info.samplerate) != expected[1:]:
        field, n, rate = expected
        raise RecordingFormatError(
            f"{path}: {info.frames} samples at {info.samplerate} Hz, but {RECORDING_FILE} "
            f"field '{field}' says {n} at {rate} Hz")
    cap = min(int(MAX_TRACK_S * info.samplerate), MAX_DECODED) + 1
    if info.frames >= cap:
        raise RecordingFormatError(f"{path}: too large to decode ({info.frames} samples at "
                                   f"{info.samplerate} Hz)")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True, frames=cap)
    except Exception as e:
        raise RecordingFormatError(f"{path}: unreadable audio: {' '.join(str(e).split())[:120]}") from None
    if len(data) >= cap:
        raise RecordingFormatError(f"{path}: decodes to more than the {MAX_TRACK_S:.0f} s "
                                   "limit of one track its header hides")
    if expected is not None and len(data) != expected[1]:
        raise RecordingFormatError(f"{path}: decodes to {len(data)} samples, but "
                                   f"{RECORDING_FILE} field '{expected[0]}' says {expected[1]}")
    if not np.isfinite(data).all():
        raise RecordingFormatError(f"{path}: samples are not finite (NaN or infinity)")
    return audio.resample(data[:, 0], sr, audio.SAMPLE_RATE)


_number = finite_number  # an int too large for a float is none either


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _expected_tracks(meta: dict, where: Path) -> dict[str, tuple[str, int, int]]:
    """What recording.json says each track holds: track -> (field, samples, rate); empty
    for a hand-made file without the counts."""
    if all(meta.get(k) is None for k in ("sample_rate", "input_samples", "output_samples")):
        return {}
    rate = meta.get("sample_rate")
    if not (_count(rate) and rate > 0):
        raise RecordingFormatError(f"{where}: field 'sample_rate' must be a positive integer, "
                                   f"not {repr(rate)[:40]}")
    out = {}
    for track in TRACKS:
        field = f"{track}_samples"
        if track == "channel_input" and meta.get(field) is None:
            continue  # only a channelled trial has it
        if not _count(meta.get(field)):
            raise RecordingFormatError(f"{where}: field '{field}' must be a number of samples, "
                                       f"not {repr(meta.get(field))[:40]}")
        out[track] = (field, meta[field], rate)
    return out


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
    raw = meta.get("events") or []
    if not isinstance(raw, list):
        raise bad("events", "must be a list of [seconds, text]")
    for k, e in enumerate(raw):
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
        if path.stat().st_size > MAX_METADATA_BYTES:
            return None  # load_recording says why
        found = json.loads(path.read_text(encoding="utf-8")).get("instance")
    except (OSError, ValueError, AttributeError, RecursionError):  # load_recording says why
        return None
    return found if found is None or isinstance(found, str) else repr(found)[:60]


def has_metadata(folder: Path | str) -> bool:
    return (Path(folder) / RECORDING_FILE).is_file()


def load_recording(folder: Path | str) -> Recording:
    """Read a folder written by ``save_recording`` or a Full-Duplex-Bench-style folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RecordingFormatError(f"{folder}: not a folder")
    meta_path = folder / RECORDING_FILE
    if not meta_path.is_file():  # the Full-Duplex-Bench layout: two tracks, nothing else
        return Recording(input=_read_track(track_file(folder, "input")),
                         output=_read_track(track_file(folder, "output")))
    if meta_path.stat().st_size > MAX_METADATA_BYTES:
        raise RecordingFormatError(f"{meta_path}: {meta_path.stat().st_size} bytes, over the "
                                   f"{MAX_METADATA_BYTES} a recording.json may take")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except RecursionError:
        raise RecordingFormatError(f"{meta_path}: not valid JSON: nested too deep") from None
    except (OSError, ValueError) as e:  # bad UTF-8 too
        raise RecordingFormatError(f"{meta_path}: not valid JSON: {' '.join(str(e).split())[:120]}") from None
    if not isinstance(meta, dict):
        raise RecordingFormatError(f"{meta_path}: must be a JSON object")
    expected = _expected_tracks(meta, meta_path)  # checked against each header first
    inp = _read_track(track_file(folder, "input"), expected.get("input"))
    out = _read_track(track_file(folder, "output"), expected.get("output"))
    words, cue, until, events = _parse(meta, meta_path)
    heard = None
    if meta.get("channel_input_samples") is not None:
        heard = _read_track(track_file(folder, "channel_input"), expected.get("channel_input"))
    return Recording(input=inp, output=out, transcript=words, cue=cue, user_sent_until=until,
                     events=events, channel_input=heard)
