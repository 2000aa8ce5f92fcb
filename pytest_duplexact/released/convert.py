"""Released parquet snapshot -> a DuplexAct-format dataset folder (docs/released-data.md).

Streamed with pyarrow in batches of BATCH_ROWS rows inside each row group, so peak memory is
bounded by about one column chunk's pages plus one clip, whatever the dataset's size. Audio
(``{path, bytes}`` structs) is decoded with soundfile (its length checked from the header
first), downmixed to mono, resampled to 16 kHz with soxr and written as FLAC once per
distinct source clip (clips shared between rows, such as lead-ins, are stored once); the
source rate is recorded per instance. Every field comes from the mapping; a row whose
required fields it cannot place, or that the loader would refuse once converted, is
*unmappable*: all of them are reported together, grouped by config and missing field, each
with its parquet file and row, and the conversion is refused unless asked to skip them.

The result is cached under ``<cache>/released/<key>``, the key hashing the snapshot's file
hashes, the mapping and CONVERTER_VERSION, and is written to a temporary folder first, so a
folder in the cache is always complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import audio
from ..data.instance import (
    ANNOTATION_FIELDS,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER,
    MANIFEST,
    MAX_CLIP_S,
    TEXT_FIELDS,
    id_problem,
    instance_problems,
    show_value,
)
from ..rules import requires
from .errors import PYTEST_OPTIONS, Options, ReleasedDataError
from .mapping import COLUMNS, Mapping, lookup, to_seconds
from .snapshot import Snapshot, cache_root  # cache_root: also read as convert.cache_root

CONVERTER_VERSION = 2  # 2: rows checked by the loader at conversion, unique ids
BATCH_ROWS = 8  # rows decoded at once (audio rows are large: ~0.5 MB per 10 s at 24 kHz)
# Most samples one clip may decode to (frames x channels): ten minutes of 48 kHz stereo.
MAX_DECODED = int(MAX_CLIP_S * 48_000 * 2)
AUDIO_TYPE = "struct<bytes: binary, path: string>"  # the datasets Audio feature
UNMAPPABLE_FILE = "unmappable.json"
# Which clip's clock (and source rate, for unit "samples") each annotation is on.
_CLOCK_ROLE = {name: ("cue" if name.startswith("cue_") else "user") for name in ANNOTATION_FIELDS}


@dataclass
class Unmappable:
    """Rows the mapping cannot place: (config, field) -> rows, with the metadata keys seen."""

    rows: list[dict] = field(default_factory=list)  # {config, row, id, fields, keys, file}

    def add(self, config: str, row: int, iid: str, fields_: dict[str, str], keys,
            where: tuple[str, int]) -> None:
        """``row`` counts the config's rows; ``where`` is (parquet file, row in that file)."""
        self.rows.append({"config": config, "row": row, "id": iid, "fields": fields_,
                          "metadata_keys": sorted(map(str, keys)), "file": where[0],
                          "file_row": where[1]})

    def __len__(self) -> int:
        return len(self.rows)

    def grouped(self) -> list[dict]:
        groups: dict[tuple[str, str], dict] = {}
        for r in self.rows:
            for f, why in r["fields"].items():
                g = groups.setdefault((r["config"], f), {"config": r["config"], "field": f,
                                                         "rows": 0, "ids": [], "keys": set(),
                                                         "why": Counter()})
                g["rows"] += 1
                g["ids"].append(f"{r['id']} ({r['file']} row {r['file_row']})"
                                if "file" in r else r["id"])
                g["keys"].update(r["metadata_keys"])
                g["why"][why] += 1
        return [{**g, "keys": sorted(g["keys"]), "why": g["why"].most_common(3)}
                for _, g in sorted(groups.items())]


def format_unmappable(rows: list[dict], total: int, mapping_sources, skipped: bool,
                      options: Options = PYTEST_OPTIONS) -> str:
    u = Unmappable(rows)
    head = (f"the mapping ({' + '.join(mapping_sources)}) cannot place {len(rows)} of {total} "
            "row(s) of the released data; by config and missing field:")
    lines = [head]
    for g in u.grouped():
        ids = ", ".join(g["ids"][:5]) + (f", ... ({len(g['ids']) - 5} more)"
                                         if len(g["ids"]) > 5 else "")
        why = "; ".join(f"{w} ({n})" for w, n in g["why"])
        lines.append(f"  config {g['config']}, {g['field']}: {g['rows']} row(s) [{ids}]: {why}")
        keys = ", ".join(g["keys"][:30]) + (f", ... ({len(g['keys']) - 30} more)"
                                             if len(g["keys"]) > 30 else "")
        lines.append(f"      metadata keys present: {keys or '(none)'}")
    if skipped:
        lines.append(f"{len(rows)} unmappable row(s) skipped ({options.skip}).")
    else:
        lines.append("Complete or correct the mapping (`duplexact inspect SOURCE` shows the "
                     f"keys; docs/released-data.md) and pass it with {options.mapping}=FILE, or "
                     "leave these rows out (values no mapping can place, such as a time outside "
                     f"its clip, included): {options.skip}.")
    return "\n".join(lines)


def nothing_left(total: int, mapping_sources, options: Options = PYTEST_OPTIONS) -> str:
    """The one line when ``options.skip`` left no row to convert (all unmappable), or the
    mapped configs' files hold no row at all."""
    if not total:
        return ("the parquet files of the mapped configs hold no rows: nothing to convert "
                "(`duplexact inspect SOURCE` shows what the snapshot holds)")
    return (f"all {total} row(s) of the released data are unmappable with the mapping "
            f"({' + '.join(mapping_sources)}), so no instance is left: check the mapping "
            "(`duplexact inspect SOURCE` shows the metadata keys; docs/released-data.md); "
            f"without {options.skip} the refusal lists the rows by config and missing field")


class _BadAudio(ValueError):
    """A clip that cannot be used; the message says why."""


def _decode(data: bytes) -> tuple[np.ndarray, int]:
    """Encoded audio -> (mono float32, source rate). Its length is taken from the header and
    checked before anything is decoded (a few kB of FLAC can hold hours of silence), and
    decoding stops at the limit whatever the header says. Raises _BadAudio."""
    import soundfile as sf

    try:
        i = sf.info(io.BytesIO(data))
    except Exception as e:  # not audio libsndfile reads
        raise _BadAudio(f"unreadable audio ({type(e).__name__}: {str(e)[:80]})") from None
    if i.samplerate <= 0 or i.channels <= 0:
        raise _BadAudio(f"unreadable audio (header: {i.samplerate} Hz, {i.channels} channel(s))")
    if i.frames <= 0:
        raise _BadAudio("no samples")
    if i.frames / i.samplerate > MAX_CLIP_S:
        raise _BadAudio(f"lasts {i.frames / i.samplerate:.0f} s (from its header), over the "
                        f"{MAX_CLIP_S:.0f} s limit for one clip")
    cap = min(int(MAX_CLIP_S * i.samplerate) + 1, MAX_DECODED // i.channels)
    if i.frames > cap:
        raise _BadAudio(f"too large to decode: {i.channels} channels x {i.frames} frames")
    try:
        x, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True, frames=cap)
    except Exception as e:  # a body that does not decode (soundfile may raise anything)
        raise _BadAudio(f"unreadable audio ({type(e).__name__}: {str(e)[:80]})") from None
    if len(x) >= cap:
        raise _BadAudio(f"decodes to more than the {MAX_CLIP_S:.0f} s limit its header hides")
    if not len(x):
        raise _BadAudio("no samples")
    if not np.isfinite(x).all():  # NaN would reach the resampler, the FLAC and the model
        raise _BadAudio("samples are not finite (NaN or infinity)")
    return x.mean(axis=1, dtype=np.float32) if x.shape[1] > 1 else x[:, 0], int(sr)


@dataclass
class _Row:
    """What the mapping makes of one row's non-audio fields."""

    condition: str | None
    corpus: str | None
    source: str | None
    scenario: str
    iid: str
    meta: dict
    problems: dict[str, str]


def parse_metadata(raw) -> tuple[dict, str | None]:
    """A row's metadata cell (a JSON string, or a struct read as a dict) -> (object, None),
    or ({}, why it is not one)."""
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return {}, f"not a JSON string ({type(raw).__name__})"
    try:
        meta = json.loads(raw)
    except ValueError as e:
        return {}, f"not valid JSON ({str(e)[:100]})"
    except RecursionError:
        return {}, "not usable JSON: nested too deeply"
    return (meta, None) if isinstance(meta, dict) else ({}, "not a JSON object")


def _first(meta: dict, keys):
    for k in keys:
        try:
            return k, lookup(meta, k)
        except KeyError:
            continue
    return None, None


def map_fields(m: Mapping, config: str, row: int, values: dict) -> _Row:
    """Condition, corpus, source, scenario, id of a row (``values``: column -> Python value)."""
    action = m.configs[config]
    problems: dict[str, str] = {}
    meta, bad = parse_metadata(values.get(m.column("metadata")))
    if bad:
        problems["metadata"] = bad
    raw_cond = values.get(m.column("condition"))
    cond = m.condition(action, raw_cond)
    if cond is None:
        problems["condition"] = f"spelling {show_value(raw_cond)} not in [conditions.{action}]"
    raw_corpus = values.get(m.column("corpus"))
    corpus = m.corpus(raw_corpus)
    source = m.source_of(corpus) if corpus else None
    if corpus is None:
        problems["corpus"] = f"value {show_value(raw_corpus)} not in [corpus.values]"
    elif source is None:
        problems["source"] = f"corpus {corpus!r} not in [corpus.source]"
    for name in COLUMNS:  # a column the file lacks (the mapping's [columns] names it)
        if m.column(name) not in values:
            problems[name] = f"the file has no column {m.column(name)!r} ([columns] {name})"
    _, scen_raw = _first(meta, m.scenario_keys)
    scenario = m.scenario(scen_raw) or "unspecified"
    _, id_raw = _first(meta, m.id_keys)
    iid = f"{config}-{row:05d}"
    if isinstance(id_raw, (str, int)) and not isinstance(id_raw, bool) and str(id_raw).strip():
        cand = f"{config}-{str(id_raw).strip()}"
        if id_problem(cand) is None:
            iid = cand
    return _Row(cond, corpus, source, scenario, iid, meta, problems)


def map_annotations(m: Mapping, r: _Row, action: str, rates: dict[str, int] | None
                    ) -> tuple[dict[str, float], dict[str, str]]:
    """Our annotations from the metadata; ``rates`` (role -> source rate) None checks presence
    only. Returns (values, problems for the required ones)."""
    need = set(requires(action, r.condition).annotations) if r.condition else set()
    values, problems = {}, {}
    for name in ANNOTATION_FIELDS:
        found = None
        for c in m.annotation_candidates(name):
            try:
                raw = lookup(r.meta, c.key)
                origin = lookup(r.meta, c.origin) if c.origin else 0.0
            except KeyError:
                continue
            found = c
            rate = None
            if c.unit == "samples":
                rate = c.rate if c.rate != "source" else (rates or {}).get(_CLOCK_ROLE[name])
                if rates is None and c.rate == "source":
                    rate = 1.0  # presence check only: the source rate is known after decoding
            try:
                values[name] = to_seconds(raw, c.unit, rate) - to_seconds(origin, c.unit, rate)
            except ValueError as e:
                if name in need:
                    problems[f"annotations.{name}"] = f"metadata '{c.key}': {e}"
            break
        if found is None and name in need:
            keys = [c.key for c in m.annotation_candidates(name)]
            problems[f"annotations.{name}"] = (f"none of the keys {keys} present" if keys else
                                               "no candidate key in [annotations]")
    return values, problems


def map_texts(m: Mapping, r: _Row, action: str) -> tuple[dict[str, str], dict[str, str]]:
    need = set(requires(action, r.condition).texts) if r.condition else set()
    texts, problems = {}, {}
    for name in TEXT_FIELDS:
        _, v = _first(r.meta, m.text_keys(name))
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            v = " ".join(v)
        if isinstance(v, str) and v.strip():
            texts[name] = v
        elif name in need:
            keys = m.text_keys(name)
            problems[f"text.{name}"] = (f"none of the keys {keys} holds a non-empty string"
                                        if keys else "no candidate key in [text]")
    return texts, problems




def _columns_of(pf, names) -> list[str]:
    have = set(pf.schema_arrow.names)
    return [n for n in names if n in have]


def open_parquet(path: Path):
    """The file as a pyarrow ParquetFile (streamed: no pre-buffering, 1 MB reads), or a
    ReleasedDataError naming it (garbage, truncated, not parquet)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except Exception as e:  # ArrowInvalid, OSError, ...: pyarrow names neither the file
        raise ReleasedDataError(f"{path}: not a readable parquet file ({type(e).__name__}: "
                                f"{str(e)[:200]})") from None


def batches(pf, path: Path, columns=None):
    """The file's rows in batches of BATCH_ROWS, one thread, no pre-buffering of whole
    column chunks (the peak stays near one page); a part that does not decode is a
    ReleasedDataError naming the file and the first row it could not read."""
    it = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False)
    done = 0
    while True:
        try:
            t = next(it)
        except StopIteration:
            return
        except Exception as e:  # a corrupt page or footer: ArrowInvalid, OSError, ...
            raise ReleasedDataError(f"{path}: not a readable parquet file: rows from {done} "
                                    f"on cannot be read ({type(e).__name__}: {str(e)[:200]})"
                                    ) from None
        yield t
        done += t.num_rows


def audio_columns(pf, path: Path, roles: dict[str, list[str]], action: str,
                  options: Options = PYTEST_OPTIONS) -> list[str]:
    """The mapped audio columns the file has. One of another arrow type (raw binary, a
    string, a list of ints, a struct whose ``bytes`` is a string) holds nothing to decode:
    refused, naming the file and the column."""
    import pyarrow as pa

    out = []
    for name in sorted({c for cs in roles.values() for c in cs}):
        if name not in pf.schema_arrow.names:
            continue
        t = pf.schema_arrow.field(name).type
        if not (pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and (
                pa.types.is_binary(t.field("bytes").type)
                or pa.types.is_large_binary(t.field("bytes").type))):
            mapped = ", ".join(r for r, cs in roles.items() if name in cs)
            raise ReleasedDataError(
                f"{path}: column '{name}' is {t}, not audio ({AUDIO_TYPE}, the datasets Audio "
                f"feature); the mapping reads it as {mapped} in [audio.{action}]: remove it "
                f"there (a mapping file passed with {options.mapping}) if it holds no audio")
        out.append(name)
    return out


def _rel(snap: Snapshot, p: Path) -> str:
    return str(p.relative_to(snap.root)).replace(os.sep, "/")


def plan(snap: Snapshot, m: Mapping, options: Options = PYTEST_OPTIONS
         ) -> tuple[int, Unmappable]:
    """A metadata-only pass (no audio read): rows, and those whose fields cannot be placed.
    A file that is not readable parquet, or an audio column of another type, is refused
    here, before any audio is decoded."""
    total, bad = 0, Unmappable()
    for cfg, paths in snap.files.items():
        action = m.configs[cfg]
        row = 0
        for p in paths:
            pf = open_parquet(p)
            audio_columns(pf, p, m.audio_roles(action), action, options)
            cols = _columns_of(pf, [m.column(c) for c in COLUMNS])
            rel, file_row = _rel(snap, p), 0
            for t in batches(pf, p, cols):
                small = {c: t.column(c).to_pylist() for c in cols}
                for k in range(t.num_rows):
                    r = map_fields(m, cfg, row, {c: v[k] for c, v in small.items()})
                    problems = dict(r.problems)
                    if r.condition:
                        problems.update(map_annotations(m, r, action, None)[1])
                        problems.update(map_texts(m, r, action)[1])
                    if problems:
                        bad.add(cfg, row, r.iid, problems, r.meta.keys(), (rel, file_row))
                    row += 1
                    file_row += 1
                    total += 1
    return total, bad


def _flac(samples: np.ndarray) -> bytes:
    """Mono 16 kHz samples as FLAC bytes, encoded in memory: the file is then written by
    Python, so a full disk is an OSError that says so (libsndfile says "System error")."""
    import soundfile as sf

    buf = io.BytesIO()
    try:  # highest (still lossless) compression; soundfile < 0.13 lacks the argument
        sf.write(buf, samples, audio.SAMPLE_RATE, format="FLAC", subtype="PCM_16",
                 compression_level=1.0)
    except TypeError:
        sf.write(buf, samples, audio.SAMPLE_RATE, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _write_clip(samples: np.ndarray, sr: int, out: Path, rel: str) -> float:
    x = np.clip(audio.resample(samples, sr, audio.SAMPLE_RATE), -1.0, 1.0)
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_bytes(_flac(x))  # inside a folder renamed when complete: no half file
    return len(x) / audio.SAMPLE_RATE


def _clips_of(batch, k: int, roles: dict[str, list[str]], audio_cols: list[str],
              stored: dict, out: Path) -> tuple[dict, dict, dict]:
    """Row ``k``'s clips: role -> stored path (first non-empty candidate column), role ->
    source rate, and problems (unusable audio). Each distinct source clip is decoded,
    resampled and written once (``stored``: source sha256 -> (path, seconds, rate), or the
    reason it cannot be used)."""
    clips, rates, problems = {}, {}, {}
    for role, cands in roles.items():
        for col in cands:
            if col not in audio_cols:
                continue
            struct = batch.column(col)[k].as_py()
            data = struct.get("bytes") if struct else None
            if not data:
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest not in stored:
                try:
                    x, sr = _decode(data)
                except _BadAudio as e:
                    stored[digest] = str(e)
                else:
                    rel = f"audio/{digest[:2]}/{digest[:24]}.flac"
                    stored[digest] = (rel, _write_clip(x, sr, out, rel), sr)
            if isinstance(stored[digest], str):
                problems[f"audio.{role}"] = f"column {col}: {stored[digest]}"
            else:
                clips[role], _, rates[role] = stored[digest]
            break
    return clips, rates, problems


def _complete(m: Mapping, r: _Row, action: str, roles: dict, clips: dict, src_rates: dict,
              problems: dict) -> tuple[dict, dict]:
    """Annotations and texts of a row whose condition is known; what its action requires but
    the row lacks (clips, annotations, texts) is added to ``problems``."""
    if not r.condition:
        return {}, {}
    for role in requires(action, r.condition).clips:
        if role not in clips and f"audio.{role}" not in problems:
            cands = roles.get(role, [])
            problems[f"audio.{role}"] = (f"columns {cands} empty or absent" if cands else
                                         f"no column mapped in [audio.{action}]")
    ann, ap = map_annotations(m, r, action, src_rates)
    texts, tp = map_texts(m, r, action)
    problems.update(ap)
    problems.update(tp)
    return ann, texts


def _unique(iid: str, config: str, row: int, taken: set[str]) -> str:
    """``iid``, else ``iid-<row>``, else ``iid-<row>-2``, ... : never an id (case folded: the
    instance folders on case-insensitive disks) already taken, whatever the data's own ids
    look like ("x-00002", "x", "x")."""
    base, n = iid, 0
    while True:
        cand = base if n == 0 else f"{base}-{row:05d}" if n == 1 else f"{base}-{row:05d}-{n}"
        n += 1
        if id_problem(cand) is not None:  # the suffix made it too long for a folder name
            base, n = f"{config}-{row:05d}", 0
        elif cand.lower() not in taken:
            return cand


def _loader_problems(line: dict, out: Path) -> dict[str, str]:
    """What the loader would refuse in the converted row (times outside or before one
    another, ...), as unmappable fields: found here, with the parquet row, not later on the
    cache's instances.jsonl."""
    return {(p.field or "instance").removesuffix(".path"): p.message
            for p in instance_problems(line, out, requires=requires)}


def convert(snap: Snapshot, m: Mapping, out: Path, skip: frozenset = frozenset(),
            log=None, options: Options = PYTEST_OPTIONS) -> tuple[int, Unmappable, Counter]:
    """Write the dataset into ``out`` (an empty folder). Rows in ``skip`` ((config, row)) are
    left out; rows the loader would refuse (their audio, times, ids) are added to the
    returned Unmappable."""
    out.mkdir(parents=True, exist_ok=True)
    stored: dict[str, tuple[str, float, int] | str] = {}  # see _clips_of
    used: set[str] = set()  # clip paths some written row names
    rates: Counter = Counter()
    bad = Unmappable()
    n_inst = 0
    ids: set[str] = set()
    with open(out / MANIFEST, "w", encoding="utf-8") as manifest:
        for cfg, paths in snap.files.items():
            action = m.configs[cfg]
            roles = m.audio_roles(action)
            row = 0
            for p in paths:
                pf = open_parquet(p)
                audio_cols = audio_columns(pf, p, roles, action, options)
                cols = _columns_of(pf, [m.column(c) for c in COLUMNS]) + audio_cols
                rel_file, file_row = _rel(snap, p), 0
                for t in batches(pf, p, cols):
                    small = {c: t.column(c).to_pylist() for c in cols if c not in audio_cols}
                    for k in range(t.num_rows):
                        this, where = row, (rel_file, file_row)
                        row += 1
                        file_row += 1
                        if (cfg, this) in skip:
                            continue
                        r = map_fields(m, cfg, this, {c: v[k] for c, v in small.items()})
                        clips, src_rates, problems = _clips_of(t, k, roles, audio_cols,
                                                               stored, out)
                        problems.update(r.problems)
                        ann, texts = _complete(m, r, action, roles, clips, src_rates,
                                               problems)
                        iid = _unique(r.iid, cfg, this, ids)
                        line = {"id": iid, "action": action, "condition": r.condition,
                                "scenario": r.scenario, "source": r.source, "corpus": r.corpus,
                                "audio": clips, "annotations": ann, "text": texts,
                                "released": {"config": cfg, "file": rel_file, "row": this,
                                             "source_sample_rate": src_rates}}
                        if not problems:
                            problems = _loader_problems(line, out)
                        if problems:
                            bad.add(cfg, this, r.iid, problems, r.meta.keys(), where)
                            continue
                        ids.add(iid.lower())
                        used.update(clips.values())
                        rates.update(src_rates.values())
                        manifest.write(json.dumps(line, ensure_ascii=False) + "\n")
                        n_inst += 1
                    del t, small
                if log:
                    log(f"duplexact: converted {rel_file}: {row} row(s) of config {cfg} so far")
    for v in stored.values():  # clips only refused rows used
        if not isinstance(v, str) and v[0] not in used:
            (out / v[0]).unlink(missing_ok=True)
    return n_inst, bad, rates


def absent_configs(snap: Snapshot, m: Mapping) -> dict[str, str]:
    """Configs of the mapping without any parquet file in the snapshot -> their actions."""
    return {c: a for c, a in sorted(m.configs.items()) if c not in snap.files}


def describe_absent(absent: dict[str, str]) -> str:
    return ("the snapshot has no parquet file for config(s) "
            + ", ".join(f"{c} (action {a})" for c, a in sorted(absent.items())))


@contextmanager
def _writing(out: Path, options: Options = PYTEST_OPTIONS):
    """A write that fails (a full disk, a file-size limit, a read-only folder) is a message
    naming the folder and the system's reason, not a traceback; what to do depends on who
    chose the folder (``options.out``, else the conversion cache)."""
    try:
        yield
    except OSError as e:
        where = (f"give another folder with {options.out} DIR" if options.out else
                 "DUPLEXACT_CACHE_DIR moves the conversion cache; `duplexact import` takes "
                 "--out")
        raise ReleasedDataError(
            f"cannot write the converted data to {out}: {e.strerror or e} (a full disk? "
            f"{where})") from None


def cache_key(snap: Snapshot, m: Mapping) -> str:
    h = hashlib.sha256(f"{snap.key()}\0{m.digest()}\0{CONVERTER_VERSION}".encode())
    return h.hexdigest()[:32]


def _header(snap: Snapshot, m: Mapping, n_inst: int, total: int, rows: list[dict],
            rates: Counter) -> dict:
    name = snap.label if snap.revision is None else f"{snap.label.split('@')[0]}@{snap.revision}"
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "name": name,
            "released": {"snapshot": snap.label, "revision": snap.revision,
                         "files": snap.hashes, "mapping": list(m.sources),
                         "mapping_sha256": m.digest(), "converter": CONVERTER_VERSION,
                         "rows": total, "instances": n_inst,
                         "unmappable": len(rows), "absent_configs": absent_configs(snap, m),
                         "source_sample_rates": {str(k): v for k, v in sorted(rates.items())},
                         "sample_rate": audio.SAMPLE_RATE}}


def import_snapshot(snap: Snapshot, m: Mapping, out: Path, skip_unmappable: bool,
                    log=None, options: Options = PYTEST_OPTIONS) -> Path:
    """Convert into ``out`` (must not exist or be empty). Refuses, before reading any audio,
    when rows are unmappable and ``skip_unmappable`` is False, or when skipping them would
    leave none; and after the conversion when rows the loader would refuse were found, or
    none is left. ``options`` spells the options the messages give."""
    total, bad = plan(snap, m, options)
    if bad and not skip_unmappable:
        raise ReleasedDataError(format_unmappable(bad.rows, total, m.sources, False, options))
    if len(bad) == total:  # every row skipped (or no row at all): nothing to convert
        raise ReleasedDataError(nothing_left(total, m.sources, options))
    skip = frozenset((r["config"], r["row"]) for r in bad.rows)
    with _writing(out, options):
        n_inst, more, rates = convert(snap, m, out, skip, log, options)
        rows = bad.rows + more.rows
        if more and not skip_unmappable:
            raise ReleasedDataError(format_unmappable(rows, total, m.sources, False, options))
        if not n_inst:  # the rest refused once decoded (their audio, times, ids)
            raise ReleasedDataError(nothing_left(total, m.sources, options))
        (out / UNMAPPABLE_FILE).write_text(json.dumps({"rows": total, "unmappable": rows},
                                                      indent=1), encoding="utf-8")
        (out / HEADER).write_text(json.dumps(_header(snap, m, n_inst, total, rows, rates),
                                             indent=1, sort_keys=True), encoding="utf-8")
    return out


# what pytest_plugin/released_data.py's describe() reads of a cached conversion's header
_HEADER_KEYS = ("snapshot", "revision", "mapping", "mapping_sha256", "rows", "instances",
                "source_sample_rates")


def _row_ok(r) -> bool:
    return isinstance(r, dict) and isinstance(r.get("id"), str) and \
        isinstance(r.get("config"), str) and isinstance(r.get("fields"), dict) and \
        isinstance(r.get("metadata_keys"), list)


def _stored_unmappable(out: Path) -> dict | None:
    """The cached conversion's unmappable.json, or None when the conversion is absent or its
    two files (read by every later run) are damaged."""
    try:
        header = json.loads((out / HEADER).read_text(encoding="utf-8"))
        stored = json.loads((out / UNMAPPABLE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(header, dict) and isinstance(header.get("released"), dict) and \
        all(k in header["released"] for k in _HEADER_KEYS) and \
        isinstance(stored, dict) and isinstance(stored.get("rows"), int) and \
        isinstance(stored.get("unmappable"), list) and all(map(_row_ok, stored["unmappable"]))
    return stored if ok else None


def convert_cached(snap: Snapshot, m: Mapping, skip_unmappable: bool, log=None) -> Path:
    """The converted folder for (snapshot, mapping): reused when present, built otherwise.
    The same unmappable rows refuse a cached conversion as they refused the first one."""
    root = cache_root() / "released"
    out = root / cache_key(snap, m)
    stored = _stored_unmappable(out)
    if stored is not None:
        if stored["unmappable"] and not skip_unmappable:
            raise ReleasedDataError(format_unmappable(stored["unmappable"], stored["rows"],
                                                      m.sources, False))
        # no instance left: a conversion an older release cached (this one refuses to)
        if len(stored["unmappable"]) == stored["rows"]:
            raise ReleasedDataError(nothing_left(stored["rows"], m.sources))
        return out
    if out.exists():  # damaged by hand or by the disk: a cache miss, built again
        shutil.rmtree(out, ignore_errors=True)
    with _writing(root):  # a read-only cache folder: a message, not a traceback
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        import_snapshot(snap, m, tmp, skip_unmappable=skip_unmappable, log=log)
        try:
            tmp.rename(out)
        except OSError:  # another process finished the same conversion first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
