"""``duplexact inspect SOURCE``: what a released parquet snapshot holds, per config, so a user
can complete the mapping (docs/released-data.md): row count, columns and types, audio sample
rates and durations, condition and corpus values with counts, and the union of metadata keys
(nested objects as dotted keys, list items indexed, ``times.pauses[0]``: the keys a mapping
writes) with an example value and how many rows have each."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass, field

from .convert import batches, open_parquet, parse_metadata
from .mapping import Mapping
from .snapshot import Snapshot


@dataclass
class ConfigInfo:
    config: str
    action: str
    files: list[str]
    rows: int = 0
    columns: dict[str, str] = field(default_factory=dict)
    audio: dict[str, dict] = field(default_factory=dict)  # column -> {rates, n, empty, s}
    conditions: Counter = field(default_factory=Counter)
    corpora: Counter = field(default_factory=Counter)
    keys: dict[str, list] = field(default_factory=dict)  # key -> [count, examples]
    bad_metadata: int = 0


LIST_ITEMS = 16  # the items of a metadata list shown (and counted) as keys of their own


def _flatten(obj: dict):
    """(key, leaf value) pairs, keys as a mapping writes them (``lookup``): nested objects
    dotted, list items indexed (``pause_interval_sec[0]``, the first ``LIST_ITEMS``); a loop,
    not recursion: metadata may nest deeply."""
    stack: list = [(obj, "")]
    while stack:
        d, prefix = stack.pop()
        items = d.items() if isinstance(d, dict) else \
            ((f"[{i}]", v) for i, v in enumerate(d[:LIST_ITEMS]))
        for k, v in items:
            key = f"{prefix}{k}" if isinstance(d, list) or not prefix else f"{prefix}.{k}"
            if isinstance(v, (dict, list)) and v:
                stack.append((v, key))
            else:
                yield key, v


def _audio_stats(col, values) -> dict:
    import soundfile as sf

    for v in values:
        if not v or not v.get("bytes"):
            col["empty"] += 1
            continue
        try:
            i = sf.info(io.BytesIO(v["bytes"]))
        except Exception:  # not audio libsndfile reads
            col["unreadable"] += 1
            continue
        col["rates"][i.samplerate] += 1
        col["channels"][i.channels] += 1
        d = i.frames / i.samplerate if i.samplerate else 0.0
        col["n"] += 1
        col["total_s"] += d
        col["min_s"] = d if col["min_s"] is None else min(col["min_s"], d)
        col["max_s"] = d if col["max_s"] is None else max(col["max_s"], d)
    return col


def inspect(snap: Snapshot, m: Mapping, examples: int = 1) -> list[ConfigInfo]:
    import pyarrow as pa

    out = []
    for cfg, paths in snap.files.items():
        info = ConfigInfo(cfg, m.configs[cfg], [str(p.relative_to(snap.root)) for p in paths])
        for p in paths:
            pf = open_parquet(p)
            for f in pf.schema_arrow:
                info.columns.setdefault(f.name, str(f.type))
            audio_cols = [f.name for f in pf.schema_arrow if pa.types.is_struct(f.type)
                          and f.type.get_field_index("bytes") >= 0]
            for t in batches(pf, p):
                info.rows += t.num_rows
                for c in audio_cols:
                    col = info.audio.setdefault(c, {"rates": Counter(), "channels": Counter(),
                                                    "n": 0, "empty": 0, "unreadable": 0,
                                                    "total_s": 0.0, "min_s": None,
                                                    "max_s": None})
                    _audio_stats(col, (t.column(c)[k].as_py() for k in range(t.num_rows)))
                cc, dc, mc = m.column("condition"), m.column("corpus"), m.column("metadata")
                names = t.schema.names
                if cc in names:
                    info.conditions.update(map(str, t.column(cc).to_pylist()))
                if dc in names:
                    info.corpora.update(map(str, t.column(dc).to_pylist()))
                if mc in names:
                    for raw in t.column(mc).to_pylist():
                        meta, bad = parse_metadata(raw)
                        if bad:
                            info.bad_metadata += 1
                            continue
                        for k, v in _flatten(meta):
                            slot = info.keys.setdefault(k, [0, []])
                            slot[0] += 1
                            if len(slot[1]) < examples:
                                slot[1].append(v)
                del t
        out.append(info)
    return out


def _short(v, limit: int = 60) -> str:
    try:
        text = json.dumps(v, ensure_ascii=False)
    except (RecursionError, ValueError):  # a list nested thousands deep, a huge integer
        text = f"<a {type(v).__name__} too deep or large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render(snap: Snapshot, infos: list[ConfigInfo]) -> str:
    lines = [f"snapshot {snap.label}" + (f" (commit {snap.revision})" if snap.revision else "")
             + f": {sum(i.rows for i in infos)} rows in {len(infos)} config(s)"]
    for i in infos:
        lines.append("")
        lines.append(f"config {i.config} -> action {i.action}: {i.rows} rows "
                     f"({', '.join(i.files)})")
        lines.append("  columns: " + ", ".join(f"{k}: {v}" for k, v in i.columns.items()))
        for c, a in i.audio.items():
            if not a["n"]:
                lines.append(f"  audio {c}: no readable clip: {a['unreadable']} unreadable "
                             f"(not audio libsndfile decodes), {a['empty']} empty"
                             if a["unreadable"] else f"  audio {c}: empty in all {a['empty']} rows")
                continue
            rates = ", ".join(f"{r} Hz x{n}" for r, n in sorted(a["rates"].items()))
            chans = ", ".join(f"{ch} ch x{n}" for ch, n in sorted(a["channels"].items()))
            lines.append(f"  audio {c}: {a['n']} clips ({rates}; {chans}), duration "
                         f"{a['min_s']:.2f}-{a['max_s']:.2f} s, mean {a['total_s'] / a['n']:.2f}"
                         f" s, total {a['total_s'] / 3600:.2f} h; {a['empty']} empty"
                         + (f", {a['unreadable']} unreadable" if a["unreadable"] else ""))
        lines.append("  condition: " + ", ".join(f"{v!r} x{n}"
                                                 for v, n in i.conditions.most_common()))
        lines.append("  dataset: " + ", ".join(f"{v!r} x{n}" for v, n in i.corpora.most_common()))
        lines.append(f"  metadata keys ({len(i.keys)}; "
                     f"{i.bad_metadata} rows without a JSON object):")
        for k, (n, ex) in sorted(i.keys.items()):
            lines.append(f"    {k}: {n}/{i.rows} rows, e.g. "
                         + " | ".join(_short(e) for e in ex))
    return "\n".join(lines)
