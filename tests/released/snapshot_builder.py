"""Builds, from the bundled fixtures, a snapshot in exactly the released dataset card's layout:
8 configs (card names), split ``test``, one parquet file each, audio as ``{path, bytes}``
structs (the ``datasets`` Audio feature) at 24 kHz, unused audio columns empty (null),
``condition`` / ``dataset`` / ``metadata`` (a JSON string) columns.

The metadata keys are ours on purpose (the real ones are unknown), with times in ms and, for
the cue, in samples at the source rate, so a test mapping (TEST_MAPPING) must say so.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import soundfile as sf

from pytest_duplexact.data import audio
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.rules import requires

RATE = 24_000
CONFIG_OF = {"wait": "wait", "backchannel": "backchannel", "ignore": "ignore",
             "take_turn": "turn_taking", "stop": "stop", "hold_floor": "hold_floor",
             "recover": "respond_and_recover", "interrupt": "interrupt_user"}
AUDIO_COLUMNS = ("input", "lead_in", "cue", "user_speech", "branch_acknowledged",
                 "branch_ignored")
CORPORA = ("synthesized", "AMI", "Loqui")

# The mapping the snapshot needs beside the bundled one (keys, units and clocks are ours).
TEST_MAPPING = """
[annotations]
user_start = [{ key = "times.user_onset_ms", unit = "ms" }]
user_end = [{ key = "times.user_offset_ms", unit = "ms" }]
pause_start = [{ key = "times.pause_onset_ms", unit = "ms" }]
pause_end = [{ key = "times.pause_offset_ms", unit = "ms" }]
other_start = [{ key = "times.distractor_onset_ms", unit = "ms" }]
other_end = [{ key = "times.distractor_offset_ms", unit = "ms" }]
interrupt_target = [{ key = "times.target_ms", unit = "ms" }]
backchannel_point = [{ key = "times.bc_point_ms", unit = "ms" }]
cue_start = [{ key = "cue_on", unit = "samples", rate = "source" }]
cue_end = [{ key = "cue_off", unit = "samples", rate = "source" }]

[text]
user = ["transcript"]
ignored = ["distractor_text"]
cue = ["cue_text"]
reference = ["reference_text"]

[id]
keys = ["sample_id"]
"""


def _struct(clip, name: str) -> dict:
    return _wav_struct(clip.load(), name)


def _wav_struct(samples, name: str) -> dict:
    x = audio.resample(samples, audio.SAMPLE_RATE, RATE)
    buf = io.BytesIO()
    sf.write(buf, x, RATE, format="WAV", subtype="PCM_16")
    return {"path": name, "bytes": buf.getvalue()}


def _ms(v):
    return None if v is None else round(v * 1000.0, 3)


def _metadata(inst) -> dict:
    a = inst.annotations
    times = {k: _ms(getattr(a, f)) for k, f in (
        ("user_onset_ms", "user_start"), ("user_offset_ms", "user_end"),
        ("pause_onset_ms", "pause_start"), ("pause_offset_ms", "pause_end"),
        ("distractor_onset_ms", "other_start"), ("distractor_offset_ms", "other_end"),
        ("target_ms", "interrupt_target"), ("bc_point_ms", "backchannel_point"))
        if getattr(a, f) is not None}
    meta = {"sample_id": inst.id, "scenario": inst.scenario.replace("_", " ").title(),
            "times": times, "transcript": inst.text("user") or None}
    if a.cue_start is not None:
        meta["cue_on"] = int(round(a.cue_start * RATE))
        meta["cue_off"] = int(round(a.cue_end * RATE))
    for key, field_ in (("distractor_text", "ignored"), ("cue_text", "cue"),
                        ("reference_text", "reference")):
        if inst.text(field_):
            meta[key] = inst.text(field_)
    return {k: v for k, v in meta.items() if v is not None}


def build(folder: Path, per_config: int = 2, row_group_size: int = 2,
          drop_key: str | None = None) -> dict[str, list[str]]:
    """Write the snapshot into ``folder``; returns config -> the fixture ids it holds.
    ``drop_key``: a top-level metadata key left out of every row (an incomplete mapping)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = load_dataset(bundled_root(), requires=requires)
    struct_t = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("condition", pa.string()), ("dataset", pa.string()),
                        ("metadata", pa.string())] + [(c, struct_t) for c in AUDIO_COLUMNS])
    held: dict[str, list[str]] = {}
    row = 0
    for action, config in CONFIG_OF.items():
        chosen, seen = [], set()
        for inst in ds.instances:  # different conditions first, so each config covers several
            if inst.action == action and inst.condition not in seen:
                chosen.append(inst)
                seen.add(inst.condition)
        chosen = chosen[:per_config]
        rows = {name: [] for name in schema.names}
        for k, inst in enumerate(chosen):
            rows["condition"].append(inst.condition.replace("_", " ").title())
            rows["dataset"].append(CORPORA[row % len(CORPORA)])
            row += 1
            meta = _metadata(inst)
            if action == "interrupt" and k == 0:
                del meta["scenario"]  # a row that does not say: reported as "unspecified"
            meta.pop(drop_key, None) if drop_key else None
            rows["metadata"].append(json.dumps(meta))
            cols = {"input": "user"} if inst.pipeline.value == "direct" else \
                {"user_speech": "user"} if action == "interrupt" else \
                {"lead_in": "lead_in", "cue": "cue"}
            for c in AUDIO_COLUMNS:
                role = cols.get(c)
                rows[c].append(_struct(inst.clip(role), f"{inst.id}.{c}.wav") if role else None)
            if action == "interrupt":  # branches: slices of the user clip stand in for speech
                x = inst.clip("user").load()
                for c, part in (("branch_acknowledged", x[: audio.SAMPLE_RATE]),
                                ("branch_ignored", x[-audio.SAMPLE_RATE:])):
                    rows[c][-1] = _wav_struct(part, f"{inst.id}.{c}.wav")
        out = folder / config / "test-00000-of-00001.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(rows, schema=schema), out, row_group_size=row_group_size)
        held[config] = [i.id for i in chosen]
    (folder / "README.md").write_text("---\nlicense: other\n---\n# test snapshot\n")
    return held


def noise_struct(seconds: float, rate: int, rng: np.random.Generator) -> dict:
    x = (rng.standard_normal(int(seconds * rate)) * 0.05).astype(np.float32)
    buf = io.BytesIO()
    sf.write(buf, x, rate, format="WAV", subtype="PCM_16")
    return {"path": "noise.wav", "bytes": buf.getvalue()}


# --- one-config snapshots for the hostile-input tests -------------------------------------------
# Rows of the ``wait`` config, condition "continuous speech": it needs the user clip,
# user_start / user_end (times.user_onset_ms / times.user_offset_ms in TEST_MAPPING) and the
# user text (transcript). Each test changes one value of a valid row.
WAIT_FILE = "wait/test-00000-of-00001.parquet"


def wav_bytes(samples, rate: int, subtype: str = "PCM_16", fmt: str = "WAV") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.asarray(samples), rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def wait_row(sample_id: str = "r", user_onset_ms=100, user_offset_ms=900,
             audio_bytes: bytes | None = None, **meta) -> dict:
    """A valid row (1 s of noise at 16 kHz, speech from 0.1 to 0.9 s); ``meta`` adds or
    replaces top-level metadata keys."""
    if audio_bytes is None:
        x = np.random.default_rng(0).standard_normal(audio.SAMPLE_RATE) * 0.05
        audio_bytes = wav_bytes(x, audio.SAMPLE_RATE)
    md = {"sample_id": sample_id, "transcript": "hello there",
          "times": {"user_onset_ms": user_onset_ms, "user_offset_ms": user_offset_ms}}
    md.update(meta)
    return {"condition": "Continuous Speech", "dataset": "AMI", "metadata": json.dumps(md),
            "input": {"bytes": audio_bytes, "path": f"{sample_id}.wav"}}


def write_rows(folder: Path, rows: list[dict], config: str = "wait", input_type=None) -> Path:
    """One parquet file of ``rows`` for ``config``; ``input_type`` overrides the arrow type of
    the ``input`` column (default: the datasets Audio struct). Returns the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    struct_t = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("condition", pa.string()), ("dataset", pa.string()),
                        ("metadata", pa.string()), ("input", input_type or struct_t)])
    cols = {n: [r.get(n) for r in rows] for n in schema.names}
    out = folder / config / "test-00000-of-00001.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols, schema=schema), out)
    return out
