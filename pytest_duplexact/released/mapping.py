"""The mapping table: released parquet -> DuplexAct format, as data (mapping.toml).

``load_mapping(user_file)`` reads the bundled table and merges the user's file over it key by
key (a table in the user's file extends the bundled one; any other value replaces it). Each
file is validated against the schema (``_Schema``: every table, key and type; unknown keys
refused with a did-you-mean) before the merge, so a mistake names its file and field.
Nothing in this module guesses an unknown: every key, unit, clock and spelling comes from the
table.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import string
import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..data import taxonomy
from ..data.instance import ANNOTATION_FIELDS, CLIP_ROLES, TEXT_FIELDS, show_value
from .errors import PYTEST_OPTIONS, Options, ReleasedDataError

BUNDLED = "mapping.toml"
UNITS = ("s", "ms", "samples")
CORPORA = taxonomy.CORPORA
COLUMNS = ("condition", "corpus", "metadata")  # [columns]: the non-audio ones


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
        raise ValueError(f"not a number: {show_value(value)}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"not a number: {show_value(value)}") from None
    if not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {show_value(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError("a number too large for seconds") from None
    if not math.isfinite(v):
        raise ValueError(f"not a finite number: {show_value(value)}")
    if unit == "s":
        return v
    if unit == "ms":
        return v / 1000.0
    if unit == "samples":
        if not rate or rate <= 0:
            raise ValueError("unit 'samples' needs a positive sample rate")
        return v / float(rate)
    raise ValueError(f"unknown unit {unit!r}; known: {', '.join(UNITS)}")


_INDEXED = re.compile(r"([^\[\]]*)((?:\[\d+\])+)")  # name[0], name[1][2], [0]


def lookup(meta: dict, dotted: str):
    """meta["a"]["b"] for "a.b" (a literal "a.b" key wins); ``[N]`` after a part indexes a
    JSON list, from 0: "pause_interval_sec[0]", "turns[2].start_ms", "grid[1][0]" (a key
    spelt with its brackets still wins). KeyError when absent."""
    if dotted in meta:
        return meta[dotted]
    cur: Any = meta
    for part in dotted.split("."):
        m = _INDEXED.fullmatch(part)
        if isinstance(cur, dict) and (part in cur or m is None):
            if part not in cur:
                raise KeyError(dotted)
            cur = cur[part]
            continue
        if m is None:
            raise KeyError(dotted)
        name, indices = m.groups()
        if name:
            if not isinstance(cur, dict) or name not in cur:
                raise KeyError(dotted)
            cur = cur[name]
        for index in map(int, re.findall(r"\d+", indices)):
            if not isinstance(cur, list) or index >= len(cur):
                raise KeyError(dotted)
            cur = cur[index]
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


# --- the schema: every table, key and type a mapping file may hold ---------------------------
TABLES = ("version", "source", "configs", "columns", "audio", "conditions", "annotations",
          "text", "id", "scenario", "corpus")
REQUIRED = ("source", "configs", "columns", "audio", "annotations", "text")  # of the merge
CANDIDATE_KEYS = ("key", "unit", "origin", "rate")
PLACEHOLDERS = ("config", "split")


def _kind(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(v), type(v).__name__)


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class _Schema:
    """Checks one file's tables (or the merged result, ``complete``) and raises MappingError
    naming the file and the field (``table.key``) at the first mistake."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, path: str, message: str):
        raise MappingError(f"{self.where}: field '{path}': {message}")

    def table(self, v, path: str) -> dict:
        if not isinstance(v, dict):
            self.fail(path, f"must be a table, got {_kind(v)}")
        return v

    def keys(self, d: dict, path: str, known, what: str = "key") -> None:
        for k in d:
            if k not in known:
                self.fail(f"{path}.{k}" if path else k,
                          f"unknown {what}{_did_you_mean(k, known)} (known: "
                          f"{', '.join(map(str, known))})")

    def string(self, v, path: str, choices=None, what: str = "value") -> str:
        if not isinstance(v, str) or not v.strip():
            self.fail(path, f"must be a string, got {_kind(v)}" if not isinstance(v, str)
                      else "must be a non-empty string")
        if choices is not None and v not in choices:
            self.fail(path, f"unknown {what} {v!r}{_did_you_mean(v, choices)} (known: "
                      f"{', '.join(choices)})")
        return v

    def strings(self, v, path: str) -> list[str]:
        if not isinstance(v, list):  # a string would be iterated as its characters
            hint = f' (write [{json.dumps(v)}])' if isinstance(v, str) else ""
            self.fail(path, f"must be a list of strings, got {_kind(v)}{hint}")
        for k, x in enumerate(v):
            self.string(x, f"{path}[{k}]")
        return v

    def synonyms(self, v, path: str, choices, what: str) -> None:
        """A table spelling -> one of ``choices``."""
        for k, t in self.table(v, path).items():
            self.string(t, f"{path}.{k}", choices, what)

    def pattern(self, v, path: str) -> None:
        self.string(v, path)
        try:
            parts = list(string.Formatter().parse(v))
        except ValueError as e:
            self.fail(path, f"not a valid pattern ({e}; write a literal brace as {{{{ or }}}})")
        names = set()
        for _, name, spec, conv in parts:
            if name is None:
                continue
            if name not in PLACEHOLDERS:
                self.fail(path, f"unknown placeholder {{{name}}}; only {{config}} and {{split}}")
            if spec or conv:
                self.fail(path, "only {config} and {split}, without format specs or conversions")
            names.add(name)
        if "config" not in names:
            self.fail(path, "must contain {config}")

    def check(self, raw: dict, complete: bool) -> None:
        self.keys(raw, "", TABLES, "table")
        if complete:
            for t in REQUIRED:
                if t not in raw:
                    self.fail(t, "missing table")
        if "version" in raw and (type(raw["version"]) is not int or raw["version"] != 1):
            self.fail("version", f"must be 1 (this release reads version 1), got "
                      f"{raw['version']!r}")
        checks = {"source": self._source, "configs": self._configs, "columns": self._columns,
                  "audio": self._audio, "conditions": self._conditions,
                  "annotations": self._annotations, "text": self._text, "id": self._id,
                  "scenario": self._scenario, "corpus": self._corpus}
        for name, fn in checks.items():
            if name in raw:
                fn(self.table(raw[name], name), complete)

    def _source(self, src: dict, complete: bool) -> None:
        self.keys(src, "source", ("repo", "split", "files"))
        for k in ("repo", "split", "files"):
            if complete and k not in src:
                self.fail(f"source.{k}", "missing")
        for k in ("repo", "split"):
            if k in src:
                self.string(src[k], f"source.{k}")
        if "files" in src:
            self.strings(src["files"], "source.files")
            if not src["files"]:
                self.fail("source.files", "needs at least one pattern")
            for k, p in enumerate(src["files"]):
                self.pattern(p, f"source.files[{k}]")

    def _configs(self, cfgs: dict, complete: bool) -> None:
        for cfg, action in cfgs.items():
            self.string(action, f"configs.{cfg}", taxonomy.ACTIONS, "action")

    def _columns(self, cols: dict, complete: bool) -> None:
        self.keys(cols, "columns", COLUMNS)
        for k in COLUMNS:
            if complete and k not in cols:
                self.fail(f"columns.{k}", "missing")
            if k in cols:
                self.string(cols[k], f"columns.{k}")

    def _audio(self, audio: dict, complete: bool) -> None:
        self.keys(audio, "audio", taxonomy.ACTIONS, "action")
        for action, roles in audio.items():
            self.keys(self.table(roles, f"audio.{action}"), f"audio.{action}", CLIP_ROLES,
                      "clip role")
            for role, cols in roles.items():
                self.strings(cols, f"audio.{action}.{role}")

    def _conditions(self, conds: dict, complete: bool) -> None:
        self.keys(conds, "conditions", taxonomy.ACTIONS, "action")
        for action, syn in conds.items():
            self.synonyms(syn, f"conditions.{action}",
                          tuple(c.id for c in taxonomy.conditions_of(action)), "condition")

    def _annotations(self, anns: dict, complete: bool) -> None:
        self.keys(anns, "annotations", ANNOTATION_FIELDS, "annotation")
        for name, cands in anns.items():
            path = f"annotations.{name}"
            if not isinstance(cands, list):
                self.fail(path, f"must be a list of {{key, unit}} tables, got {_kind(cands)}")
            for k, c in enumerate(cands):
                f = f"{path}[{k}]"
                if not isinstance(c, dict):
                    self.fail(f, f"must be a table {{ key = ..., unit = ... }}, got {_kind(c)}")
                self.keys(c, f, CANDIDATE_KEYS)
                if "key" not in c:
                    self.fail(f"{f}.key", "missing (the metadata key to read)")
                self.string(c["key"], f"{f}.key")
                self.string(c.get("unit", "s"), f"{f}.unit", UNITS, "unit")
                rate = c.get("rate", "source")
                if rate != "source" and (isinstance(rate, bool) or not isinstance(
                        rate, (int, float)) or not math.isfinite(rate) or rate <= 0):
                    self.fail(f"{f}.rate", f"must be 'source' or a positive number of Hz, got "
                              f"{rate!r}")
                if "origin" in c:
                    self.string(c["origin"], f"{f}.origin")

    def _text(self, text: dict, complete: bool) -> None:
        self.keys(text, "text", TEXT_FIELDS, "text field")
        for name, keys in text.items():
            self.strings(keys, f"text.{name}")

    def _id(self, id_: dict, complete: bool) -> None:
        self.keys(id_, "id", ("keys",))
        if "keys" in id_:
            self.strings(id_["keys"], "id.keys")

    def _scenario(self, scen: dict, complete: bool) -> None:
        self.keys(scen, "scenario", ("keys", "values"))
        if "keys" in scen:
            self.strings(scen["keys"], "scenario.keys")
        if "values" in scen:
            self.synonyms(scen["values"], "scenario.values", taxonomy.SCENARIOS, "scenario")

    def _corpus(self, corpus: dict, complete: bool) -> None:
        self.keys(corpus, "corpus", ("values", "source"))
        if "values" in corpus:
            self.synonyms(corpus["values"], "corpus.values", CORPORA, "corpus")
        if "source" in corpus:
            src = self.table(corpus["source"], "corpus.source")
            self.keys(src, "corpus.source", CORPORA, "corpus")
            for k, v in src.items():
                self.string(v, f"corpus.source.{k}", taxonomy.SOURCES, "source")


def _read(path_or_text, where: str) -> dict:
    try:
        return tomllib.loads(path_or_text)
    except tomllib.TOMLDecodeError as e:
        raise MappingError(f"{where}: not valid TOML: {e}") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise MappingError(f"{where}: not valid TOML: nested too deeply") from None


def load_mapping(user_file: Path | str | None = None,
                 options: Options = PYTEST_OPTIONS) -> Mapping:
    """The bundled table with ``user_file`` merged over it; ``options`` names the option that
    passed the file, in a message about it."""
    bundled = files(__package__).joinpath(BUNDLED).read_text(encoding="utf-8")
    raw = _read(bundled, f"pytest_duplexact/released/{BUNDLED}")
    sources = [BUNDLED]
    if user_file:
        p = Path(user_file)
        try:
            data = p.read_bytes()
        except OSError as e:
            raise MappingError(f"{options.mapping}={p}: cannot be read ({e.strerror or e}); "
                               "give the path of an existing TOML mapping file") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MappingError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); save the "
                               "mapping as UTF-8") from None
        user = _read(text, str(p))
        _Schema(str(p)).check(user, complete=False)  # the user's mistakes name the user's file
        raw = _merge(raw, user)
        sources.append(str(p))
    _Schema(" + ".join(sources)).check(raw, complete=True)
    return Mapping(raw, tuple(sources))
