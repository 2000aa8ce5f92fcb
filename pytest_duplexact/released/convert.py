"""Released parquet snapshot -> a DuplexAct-format dataset folder (docs/released-data.md).

Streamed with pyarrow in batches of BATCH_ROWS rows inside each row group, so peak memory is
bounded by about one column chunk's pages plus one clip, whatever the dataset's size. Audio (``{path, bytes}`` structs) is decoded with
soundfile, downmixed to mono, resampled to 16 kHz with soxr and written as FLAC once per
distinct source clip (clips shared between rows, such as lead-ins, are stored once); the
source rate is recorded per instance. Every field comes from the mapping; a row whose
required fields it cannot place is *unmappable*: all of them are reported together, grouped
by config and missing field, and the conversion is refused unless asked to skip them.

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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import audio
from ..data.instance import (ANNOTATION_FIELDS, FORMAT_NAME, FORMAT_VERSION, HEADER, MANIFEST,
                             TEXT_FIELDS, id_problem, required_fields)
from . import ReleasedDataError
from .mapping import COLUMNS, Mapping, lookup, to_seconds
from .snapshot import Snapshot, cache_root  # noqa: F401 (cache_root: convert.cache_root)

CONVERTER_VERSION = 1
BATCH_ROWS = 8  # rows decoded at once (audio rows are large: ~0.5 MB per 10 s at 24 kHz)
UNMAPPABLE_FILE = "unmappable.json"
# Which clip's clock (and source rate, for unit "samples") each annotation is on.
_CLOCK_ROLE = {name: ("cue" if name.startswith("cue_") else "user") for name in ANNOTATION_FIELDS}


@dataclass
class Unmappable:
    """Rows the mapping cannot place: (config, field) -> rows, with the metadata keys seen."""

    rows: list[dict] = field(default_factory=list)  # {config, row, id, fields, keys, values}

    def add(self, config: str, row: int, iid: str, fields_: dict[str, str], keys) -> None:
        self.rows.append({"config": config, "row": row, "id": iid, "fields": fields_,
                          "metadata_keys": sorted(keys)})

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
                g["ids"].append(r["id"])
                g["keys"].update(r["metadata_keys"])
                g["why"][why] += 1
        return [{**g, "keys": sorted(g["keys"]), "why": g["why"].most_common(3)}
                for _, g in sorted(groups.items())]


def format_unmappable(rows: list[dict], total: int, mapping_sources, skipped: bool) -> str:
    u = Unmappable(rows)
    head = (f"the mapping ({' + '.join(mapping_sources)}) cannot place {len(rows)} of {total} "
            "row(s) of the released data; by config and missing field:")
    lines = [head]
    for g in u.grouped():
        ids = ", ".join(g["ids"][:5]) + (f", ... ({len(g['ids']) - 5} more)"
                                         if len(g["ids"]) > 5 else "")
        why = "; ".join(f"{w} ({n})" for w, n in g["why"])
        lines.append(f"  config {g['config']}, {g['field']}: {g['rows']} row(s) [{ids}]: {why}")
        lines.append(f"      metadata keys present: {', '.join(g['keys']) or '(none)'}")
    if skipped:
        lines.append(f"{len(rows)} unmappable row(s) skipped (--duplexact-skip-unmappable).")
    else:
        lines.append("Complete the mapping (`duplexact inspect SOURCE` shows the keys; "
                     "docs/released-data.md) and pass it with --duplexact-data-mapping=FILE, or "
                     "run without these rows: --duplexact-skip-unmappable.")
    return "\n".join(lines)


def _decode(struct) -> tuple[np.ndarray, int] | None:
    """A ``{path, bytes}`` audio struct -> (mono float32, source rate); None when empty."""
    if not struct or not struct.get("bytes"):
        return None
    import soundfile as sf

    data, sr = sf.read(io.BytesIO(struct["bytes"]), dtype="float32", always_2d=True)
    return data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0], int(sr)


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


def _meta_of(raw) -> tuple[dict, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return {}, f"not a JSON string ({type(raw).__name__})"
    try:
        meta = json.loads(raw)
    except ValueError as e:
        return {}, f"not valid JSON ({e})"
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
    meta, bad = _meta_of(values.get(m.column("metadata")))
    if bad:
        problems["metadata"] = bad
    raw_cond = values.get(m.column("condition"))
    cond = m.condition(action, raw_cond)
    if cond is None:
        problems["condition"] = f"spelling {raw_cond!r} not in [conditions.{action}]"
    raw_corpus = values.get(m.column("corpus"))
    corpus = m.corpus(raw_corpus)
    source = m.source_of(corpus) if corpus else None
    if corpus is None:
        problems["corpus"] = f"value {raw_corpus!r} not in [corpus.values]"
    elif source is None:
        problems["source"] = f"corpus {corpus!r} not in [corpus.source]"
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
    need = set(required_fields(action, r.condition)["ann"]) if r.condition else set()
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
    need = set(required_fields(action, r.condition)["text"]) if r.condition else set()
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


def plan(snap: Snapshot, m: Mapping) -> tuple[int, Unmappable]:
    """A metadata-only pass (no audio read): rows, and those whose fields cannot be placed."""
    import pyarrow.parquet as pq

    total, bad = 0, Unmappable()
    for cfg, paths in snap.files.items():
        action = m.configs[cfg]
        row = 0
        for p in paths:
            pf = pq.ParquetFile(p)
            cols = _columns_of(pf, [m.column(c) for c in COLUMNS])
            for rg in range(pf.num_row_groups):
                t = pf.read_row_group(rg, columns=cols).to_pydict()
                for k in range(len(t[cols[0]]) if cols else pf.metadata.row_group(rg).num_rows):
                    r = map_fields(m, cfg, row, {c: t[c][k] for c in cols})
                    problems = dict(r.problems)
                    if r.condition:
                        problems.update(map_annotations(m, r, action, None)[1])
                        problems.update(map_texts(m, r, action)[1])
                    if problems:
                        bad.add(cfg, row, r.iid, problems, r.meta.keys())
                    row += 1
                    total += 1
    return total, bad


def _write_clip(samples: np.ndarray, sr: int, out: Path, rel: str) -> float:
    x = audio.resample(samples, sr, audio.SAMPLE_RATE)
    audio.write(out / rel, np.clip(x, -1.0, 1.0))
    return len(x) / audio.SAMPLE_RATE


def _clips_of(batch, k: int, roles: dict[str, list[str]], audio_cols: list[str],
              stored: dict, out: Path) -> tuple[dict, dict, dict]:
    """Row ``k``'s clips: role -> stored path (first non-empty candidate column), role ->
    source rate, and problems (unreadable audio). Each distinct source clip is decoded,
    resampled and written once (``stored``: source sha256 -> (path, seconds, rate))."""
    clips, rates, problems = {}, {}, {}
    for role, cands in roles.items():
        for col in cands:
            if col not in audio_cols:
                continue
            struct = batch.column(col)[k].as_py()
            if not struct or not struct.get("bytes"):
                continue
            digest = hashlib.sha256(struct["bytes"]).hexdigest()
            if digest not in stored:
                try:
                    x, sr = _decode(struct)
                except Exception as e:  # corrupt, or not audio libsndfile reads
                    problems[f"audio.{role}"] = (f"column {col}: unreadable audio "
                                                 f"({type(e).__name__}: {str(e)[:80]})")
                    break
                rel = f"audio/{digest[:2]}/{digest[:24]}.flac"
                stored[digest] = (rel, _write_clip(x, sr, out, rel), sr)
            clips[role], _, rates[role] = stored[digest]
            break
    return clips, rates, problems


def _complete(m: Mapping, r: _Row, action: str, roles: dict, clips: dict, src_rates: dict,
              problems: dict) -> tuple[dict, dict]:
    """Annotations and texts of a row whose condition is known; what its action requires but
    the row lacks (clips, annotations, texts) is added to ``problems``."""
    if not r.condition:
        return {}, {}
    for role in required_fields(action, r.condition)["clips"]:
        if role not in clips and f"audio.{role}" not in problems:
            cands = roles.get(role, [])
            problems[f"audio.{role}"] = (f"columns {cands} empty or absent" if cands else
                                         f"no column mapped in [audio.{action}]")
    ann, ap = map_annotations(m, r, action, src_rates)
    texts, tp = map_texts(m, r, action)
    problems.update(ap)
    problems.update(tp)
    return ann, texts


def convert(snap: Snapshot, m: Mapping, out: Path, skip: frozenset = frozenset(),
            log=None) -> tuple[int, Unmappable, Counter]:
    """Write the dataset into ``out`` (an empty folder). Rows in ``skip`` ((config, row)) are
    left out; rows whose required audio is empty are added to the returned Unmappable."""
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    stored: dict[str, tuple[str, float, int]] = {}  # source sha256 -> (path, seconds, rate)
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
                # streamed in small batches inside each row group, one thread, no
                # pre-buffering of whole column chunks: the peak stays near one page
                pf = pq.ParquetFile(p, pre_buffer=False, buffer_size=1 << 20)
                audio_cols = _columns_of(pf, sorted({c for cs in roles.values() for c in cs}))
                cols = _columns_of(pf, [m.column(c) for c in COLUMNS]) + audio_cols
                rel_file = str(p.relative_to(snap.root)).replace(os.sep, "/")
                for t in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols,
                                         use_threads=False):
                    small = {c: t.column(c).to_pylist() for c in cols if c not in audio_cols}
                    for k in range(t.num_rows):
                        this = row
                        row += 1
                        if (cfg, this) in skip:
                            continue
                        r = map_fields(m, cfg, this, {c: v[k] for c, v in small.items()})
                        clips, src_rates, problems = _clips_of(t, k, roles, audio_cols,
                                                               stored, out)
                        problems.update(r.problems)
                        rates.update(src_rates.values())
                        ann, texts = _complete(m, r, action, roles, clips, src_rates,
                                               problems)
                        if problems:
                            bad.add(cfg, this, r.iid, problems, r.meta.keys())
                            continue
                        iid = r.iid if r.iid.lower() not in ids else f"{r.iid}-{this:05d}"
                        ids.add(iid.lower())
                        line = {"id": iid, "action": action, "condition": r.condition,
                                "scenario": r.scenario, "source": r.source, "corpus": r.corpus,
                                "audio": clips, "annotations": ann, "text": texts,
                                "released": {"config": cfg, "file": rel_file, "row": this,
                                             "source_sample_rate": src_rates}}
                        manifest.write(json.dumps(line, ensure_ascii=False) + "\n")
                        n_inst += 1
                    del t, small
                if log:
                    log(f"duplexact: converted {rel_file}: {row} row(s) of config {cfg} so far")
    return n_inst, bad, rates


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
                         "unmappable": len(rows),
                         "source_sample_rates": {str(k): v for k, v in sorted(rates.items())},
                         "sample_rate": audio.SAMPLE_RATE}}


def import_snapshot(snap: Snapshot, m: Mapping, out: Path, skip_unmappable: bool,
                    log=None) -> Path:
    """Convert into ``out`` (must not exist or be empty). Refuses, before reading any audio,
    when rows are unmappable and ``skip_unmappable`` is False."""
    total, bad = plan(snap, m)
    if bad and not skip_unmappable:
        raise ReleasedDataError(format_unmappable(bad.rows, total, m.sources, False))
    skip = frozenset((r["config"], r["row"]) for r in bad.rows)
    n_inst, more, rates = convert(snap, m, out, skip, log)
    rows = bad.rows + more.rows
    if more and not skip_unmappable:
        raise ReleasedDataError(format_unmappable(rows, total, m.sources, False))
    (out / UNMAPPABLE_FILE).write_text(json.dumps({"rows": total, "unmappable": rows},
                                                  indent=1), encoding="utf-8")
    (out / HEADER).write_text(json.dumps(_header(snap, m, n_inst, total, rows, rates),
                                         indent=1, sort_keys=True), encoding="utf-8")
    return out


def convert_cached(snap: Snapshot, m: Mapping, skip_unmappable: bool, log=None) -> Path:
    """The converted folder for (snapshot, mapping): reused when present, built otherwise.
    The same unmappable rows refuse a cached conversion as they refused the first one."""
    root = cache_root() / "released"
    out = root / cache_key(snap, m)
    if (out / HEADER).is_file() and (out / UNMAPPABLE_FILE).is_file():
        stored = json.loads((out / UNMAPPABLE_FILE).read_text(encoding="utf-8"))
        if stored["unmappable"] and not skip_unmappable:
            raise ReleasedDataError(format_unmappable(stored["unmappable"], stored["rows"],
                                                      m.sources, False))
        return out
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
