"""Write a dataset folder from the fixture source: dataset.json, instances.jsonl, audio/*.flac.

Everything is built and checked in memory first; nothing is written unless every instance
keeps its promises. A full run also removes audio files no instance names any more. With
``only``, just those instances are rendered, and their lines replace the ones already in the
folder's instances.jsonl (the others are kept), so one instance can be refreshed in place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..data import audio, instance, taxonomy
from . import build, source, tts


@dataclass(frozen=True)
class Summary:
    out: Path
    written: int  # instances rendered in this run
    total: int  # instances in the folder's manifest afterwards
    audio_files: int
    bytes: int  # size of the whole folder (audio + manifest + header)
    coverage: str  # what the source covers (coverage())


def default_source() -> Path:
    return instance.bundled_root() / "source" / "transcripts.toml"


def select(src: source.Source, only: list[str] | None) -> list[source.Entry]:
    if not only:
        return list(src.entries)
    by_id = {e.id: e for e in src.entries}
    unknown = [i for i in only if i not in by_id]
    if unknown:
        raise source.SourceError([f"{src.path}: no instance {i!r} (ids look like "
                                  f"{src.entries[0].id})" for i in unknown])
    return [by_id[i] for i in dict.fromkeys(only)]


def check_coverage(src: source.Source, minimum: int = 3) -> list[str]:
    """Every condition of the taxonomy needs ``minimum`` instances over as many scenarios."""
    problems = []
    for cond in taxonomy.CONDITIONS:
        mine = [e for e in src.entries if e.cond == cond]
        scenarios = {e.scenario for e in mine}
        if len(mine) < minimum or len(scenarios) < minimum:
            problems.append(f"{src.path}: condition {cond.key} has {len(mine)} instance(s) in "
                            f"{len(scenarios)} scenario(s); needs >= {minimum} of each")
    return problems


BUNDLED_NAME = "duplexact-bundled"


def is_bundled(src: source.Source) -> bool:
    """The bundled set's own source: only it promises the coverage docs/fixtures.md states."""
    return src.path.resolve() == default_source().resolve()


def generate(out: Path | str, src_path: Path | str | None = None,
             only: list[str] | None = None, log=print, name: str | None = None) -> Summary:
    src = source.load(src_path or default_source())
    out = Path(out)
    bundled = is_bundled(src)
    previous = _existing_header(out)
    if not bundled and (out.resolve() == instance.bundled_root().resolve()
                        or previous.get("name") == BUNDLED_NAME or name == BUNDLED_NAME):
        # the installed bundled folder, or a checkout's (a non-editable install's is another)
        raise source.SourceError([f"{src.path}: refusing to write a custom source as the "
                                  f"bundled fixture set ({out}, {BUNDLED_NAME}); pass --out "
                                  "DIR and another --name"])
    if only and name is None:  # refreshing some instances keeps the set's name
        name = previous.get("name")
    entries = select(src, only)
    # The bundled set must cover every condition; a user's own source may be as small as
    # one instance (its coverage is reported, not required).
    problems = [] if only or not bundled else check_coverage(src)
    talks = {e.talk.id: e.talk for e in entries if e.talk is not None}
    for talk in talks.values():
        problems += build.check_talk(src, talk)
    built: list[build.Built] = []
    for k, entry in enumerate(entries, 1):
        b, broken = build.build(src, entry)
        problems += broken
        built.append(b)
        if log and (k % 12 == 0 or k == len(entries)):
            log(f"rendered {k}/{len(entries)} instances")
    if problems:
        raise source.SourceError(problems)

    files = {path: samples for b in built for path, samples in b.files.items()}
    for path, samples in sorted(files.items()):
        audio.write(out / path, samples)
    order = {e.id: k for k, e in enumerate(_taxonomy_order(src.entries))}
    lines = {b.record["id"]: json.dumps(b.record, ensure_ascii=False) for b in built}
    if only:
        lines = {**_existing_lines(out), **lines}
    else:
        _remove_stale_audio(out, set(files))
    ids = sorted(lines, key=lambda i: (order.get(i, len(order)), i))
    (out / instance.MANIFEST).write_text("".join(lines[i] + "\n" for i in ids), "utf-8")
    header = _header(src, out, len(ids), name)
    (out / instance.HEADER).write_text(json.dumps(header, indent=2) + "\n", "utf-8")
    size = sum(p.stat().st_size for p in out.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts)
    return Summary(out, len(built), len(ids), len(list((out / "audio").glob("*.flac"))), size,
                   coverage(src))


def _taxonomy_order(entries) -> list[source.Entry]:
    rank = {c.key: k for k, c in enumerate(taxonomy.CONDITIONS)}
    return sorted(entries, key=lambda e: (rank[e.cond.key], e.index))


def _existing_header(out: Path) -> dict:
    try:
        header = json.loads((out / instance.HEADER).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def _existing_lines(out: Path) -> dict[str, str]:
    manifest = out / instance.MANIFEST
    if not manifest.is_file():
        return {}
    lines = {}
    for line in manifest.read_text("utf-8").splitlines():
        if line.strip():
            lines[json.loads(line)["id"]] = line
    return lines


def _remove_stale_audio(out: Path, keep: set[str]) -> None:
    for p in (out / "audio").glob("*.flac"):
        if f"audio/{p.name}" not in keep:
            p.unlink()


def _header(src: source.Source, out: Path, count: int, name: str | None) -> dict:
    try:
        where = src.path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        where = str(src.path)
    if is_bundled(src):
        default_name = BUNDLED_NAME
        description = ("Small synthesized DuplexAct fixture set: every condition in at least "
                       "three scenarios; annotations exact by construction (docs/fixtures.md).")
    else:  # a user's own set is named after itself, never passed off as the bundled one
        default_name = out.resolve().name
        description = (f"Synthesized DuplexAct dataset rendered from {src.path.name}; "
                       "annotations exact by construction (docs/fixtures.md).")
    return {
        "format": instance.FORMAT_NAME,
        "version": instance.FORMAT_VERSION,
        "name": name or src.name or default_name,
        "description": src.description or description,
        "source": where,
        "generator": "python -m pytest_duplexact.fixturegen",
        "tts": tts.version(),
        "sample_rate": audio.SAMPLE_RATE,
        "instances": count,
    }


def coverage(src: source.Source) -> str:
    """One line on what a source covers, e.g. '3 of 24 conditions (take_turn.delayed, ...)'."""
    covered = [c.key for c in taxonomy.CONDITIONS if any(e.cond == c for e in src.entries)]
    shown = ", ".join(covered) if len(covered) <= 6 else ", ".join(covered[:6]) + ", ..."
    return f"{len(covered)} of {len(taxonomy.CONDITIONS)} conditions ({shown})"
