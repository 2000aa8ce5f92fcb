"""The mapping table: released parquet -> DuplexAct format, as data (mapping.toml).

``load_mapping(user_file)`` reads the bundled table and merges the user's file over it key by
key (a table in the user's file extends the bundled one; any other value replaces it), then
checks its shape so a mistake names the file and the field. Nothing in this module guesses an
unknown: every key, unit, clock and spelling comes from the table.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..data import taxonomy
from ..data.instance import ANNOTATION_FIELDS, CLIP_ROLES, TEXT_FIELDS
from . import ReleasedDataError

BUNDLED = "mapping.toml"
UNITS = ("s", "ms", "samples")
CORPORA = taxonomy.CORPORA


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def normalise(value: str) -> str:
    """Spelling-insensitive form of a condition / scenario / corpus value."""
    return re.sub(r"[\s\-]+", "_", str(value).strip().lower())


class MappingError(ReleasedDataError):
    pass


@dataclass(frozen=True)
class Candidate:
    key: str
    unit: str = "s"
    origin: str | None = None  # metadata key the value is measured from (same unit)
    rate: float | str = "source"  # samples only: "source" or Hz


def to_seconds(value: Any, unit: str, rate: float | None = None) -> float:
    """A metadata time value in ``unit`` -> seconds. Raises ValueError with the reason.
    Accepts JSON numbers and numeric strings; never booleans, NaN or infinities."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"not a number: {value!r}") from None
    if not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError("a number too large for seconds") from None
    if not math.isfinite(v):
        raise ValueError(f"not a finite number: {value!r}")
    if unit == "s":
        return v
    if unit == "ms":
        return v / 1000.0
    if unit == "samples":
        if not rate or rate <= 0:
            raise ValueError("unit 'samples' needs a positive sample rate")
        return v / float(rate)
    raise ValueError(f"unknown unit {unit!r}; known: {', '.join(UNITS)}")


def lookup(meta: dict, dotted: str):
    """meta["a"]["b"] for "a.b" (a literal "a.b" key wins); KeyError when absent."""
    if dotted in meta:
        return meta[dotted]
    cur: Any = meta
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise KeyError(dotted)
        cur = cur[part]
    return cur


@dataclass(frozen=True)
class Mapping:
    raw: dict
    sources: tuple[str, ...]  # files it was read from, for messages

    # --- shape ------------------------------------------------------------------------
    @property
    def repo(self) -> str:
        return self.raw["source"]["repo"]

    @property
    def split(self) -> str:
        return self.raw["source"]["split"]

    @property
    def file_patterns(self) -> list[str]:
        return list(self.raw["source"]["files"])

    @property
    def configs(self) -> dict[str, str]:
        return dict(self.raw["configs"])

    def column(self, name: str) -> str:
        return self.raw["columns"][name]

    def audio_roles(self, action: str) -> dict[str, list[str]]:
        return {r: list(c) for r, c in self.raw.get("audio", {}).get(action, {}).items()}

    def condition(self, action: str, value) -> str | None:
        """Our condition id for a spelling, or None (never a guess)."""
        if not isinstance(value, str):
            return None
        v = normalise(value)
        for prefix in (f"{action}.", f"{action}/"):
            if v.startswith(prefix):
                v = v[len(prefix):]
        ours = {c.id for c in taxonomy.conditions_of(action)}
        if v in ours:
            return v
        syn = {normalise(k): t for k, t in self.raw.get("conditions", {}).get(action, {}).items()}
        return syn.get(v)

    def annotation_candidates(self, name: str) -> list[Candidate]:
        return [Candidate(c["key"], c.get("unit", "s"), c.get("origin"), c.get("rate", "source"))
                for c in self.raw.get("annotations", {}).get(name, [])]

    def text_keys(self, name: str) -> list[str]:
        return list(self.raw.get("text", {}).get(name, []))

    @property
    def id_keys(self) -> list[str]:
        return list(self.raw.get("id", {}).get("keys", []))

    @property
    def scenario_keys(self) -> list[str]:
        return list(self.raw.get("scenario", {}).get("keys", []))

    def scenario(self, value) -> str | None:
        if not isinstance(value, str):
            return None
        v = normalise(value)
        if v in taxonomy.SCENARIOS:
            return v
        return {normalise(k): t for k, t in
                self.raw.get("scenario", {}).get("values", {}).items()}.get(v)

    def corpus(self, value) -> str | None:
        if not isinstance(value, str):
            return None
        v = normalise(value)
        for c in CORPORA:
            if normalise(c) == v:
                return c
        return {normalise(k): t for k, t in
                self.raw.get("corpus", {}).get("values", {}).items()}.get(v)

    def source_of(self, corpus: str) -> str | None:
        return self.raw.get("corpus", {}).get("source", {}).get(corpus)

    def digest(self) -> str:
        """Identity of the mapping for the conversion cache key."""
        blob = json.dumps(self.raw, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()


def _check(raw: dict, where: str) -> None:
    def fail(field_: str, message: str):
        raise MappingError(f"{where}: field '{field_}': {message}")

    for table in ("source", "configs", "columns", "audio", "annotations", "text"):
        if not isinstance(raw.get(table), dict):
            fail(table, "missing table")
    src = raw["source"]
    for k in ("repo", "split"):
        if not isinstance(src.get(k), str) or not src.get(k):
            fail(f"source.{k}", "must be a non-empty string")
    if not isinstance(src.get("files"), list) or not all(isinstance(p, str) and "{config}" in p
                                                         for p in src["files"]):
        fail("source.files", "must be a list of patterns, each containing {config}")
    for cfg, action in raw["configs"].items():
        if action not in taxonomy.ACTIONS:
            fail(f"configs.{cfg}", f"unknown action {action!r}; known: "
                 f"{', '.join(taxonomy.ACTIONS)}")
    for k in ("condition", "corpus", "metadata"):
        if not isinstance(raw["columns"].get(k), str):
            fail(f"columns.{k}", "must be a column name")
    for action, roles in raw["audio"].items():
        if action not in taxonomy.ACTIONS:
            fail(f"audio.{action}", "unknown action")
        for role, cols in roles.items():
            if role not in CLIP_ROLES:
                fail(f"audio.{action}.{role}", f"unknown clip role; known: {', '.join(CLIP_ROLES)}")
            if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
                fail(f"audio.{action}.{role}", "must be a list of column names")
    for action, syn in raw.get("conditions", {}).items():
        ours = {c.id for c in taxonomy.conditions_of(action)} if action in taxonomy.ACTIONS \
            else fail(f"conditions.{action}", "unknown action")
        for k, v in syn.items():
            if v not in ours:
                fail(f"conditions.{action}.{k}", f"unknown condition {v!r} for {action}")
    for name, cands in raw["annotations"].items():
        if name not in ANNOTATION_FIELDS:
            fail(f"annotations.{name}", "unknown annotation")
        if not isinstance(cands, list):
            fail(f"annotations.{name}", "must be a list of {key, unit} tables")
        for k, c in enumerate(cands):
            f = f"annotations.{name}[{k}]"
            if not isinstance(c, dict) or not isinstance(c.get("key"), str):
                fail(f, "must be a table with a string 'key'")
            if c.get("unit", "s") not in UNITS:
                fail(f"{f}.unit", f"unknown unit {c.get('unit')!r}; known: {', '.join(UNITS)}")
            rate = c.get("rate", "source")
            if rate != "source" and not (isinstance(rate, (int, float)) and rate > 0):
                fail(f"{f}.rate", "must be 'source' or a positive number of Hz")
            if "origin" in c and not isinstance(c["origin"], str):
                fail(f"{f}.origin", "must be a metadata key")
    for name, keys in raw["text"].items():
        if name not in TEXT_FIELDS:
            fail(f"text.{name}", "unknown text field")
        if not isinstance(keys, list):
            fail(f"text.{name}", "must be a list of metadata keys")
    for k, v in raw.get("scenario", {}).get("values", {}).items():
        if v not in taxonomy.SCENARIOS:
            fail(f"scenario.values.{k}", f"unknown scenario {v!r}")
    for k, v in raw.get("corpus", {}).get("values", {}).items():
        if v not in CORPORA:
            fail(f"corpus.values.{k}", f"unknown corpus {v!r}; known: {', '.join(CORPORA)}")
    for k, v in raw.get("corpus", {}).get("source", {}).items():
        if v not in taxonomy.SOURCES:
            fail(f"corpus.source.{k}", f"unknown source {v!r}")


def _read(path_or_text, where: str) -> dict:
    try:
        return tomllib.loads(path_or_text)
    except tomllib.TOMLDecodeError as e:
        raise MappingError(f"{where}: not valid TOML: {e}") from None


def load_mapping(user_file: Path | str | None = None) -> Mapping:
    bundled = files(__package__).joinpath(BUNDLED).read_text(encoding="utf-8")
    raw = _read(bundled, f"pytest_duplexact/released/{BUNDLED}")
    sources = [BUNDLED]
    if user_file:
        p = Path(user_file)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise MappingError(f"--duplexact-data-mapping={p}: cannot be read: {e}") from None
        raw = _merge(raw, _read(text, str(p)))
        sources.append(str(p))
    _check(raw, " + ".join(sources))
    return Mapping(raw, tuple(sources))
