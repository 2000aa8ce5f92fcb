"""Fuzzing the released-data importer (issue 22): mapping TOML files and parquet metadata
values either convert cleanly or fail with a message naming the file and the field; never a
traceback, never a cache entry that a later run would use and the loader refuse."""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
import tomllib
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.instance import load_dataset
from pytest_duplexact.released import ReleasedDataError, resolve_data
from pytest_duplexact.released.convert import plan
from pytest_duplexact.released.mapping import MappingError, _merge, load_mapping
from pytest_duplexact.released.snapshot import resolve_snapshot
from pytest_duplexact.rules import requires
from tests.released.snapshot_builder import TEST_MAPPING, WAIT_FILE, wait_row, write_rows


# Modest counts (a few seconds together); a loaded mapping costs a plan, a metadata value a
# conversion. 150 mapping files are about what it takes to reach the shapes that crashed.
def _fuzz(n: int):
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def _fresh_cache():
    """A conversion cache of its own for one example (DUPLEXACT_CACHE_DIR)."""
    old = os.environ.get("DUPLEXACT_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        os.environ["DUPLEXACT_CACHE_DIR"] = d
        try:
            yield Path(d)
        finally:
            if old is None:
                os.environ.pop("DUPLEXACT_CACHE_DIR", None)
            else:
                os.environ["DUPLEXACT_CACHE_DIR"] = old


def _every_entry_loads(cache: Path) -> None:
    root = cache / "released"
    for entry in (root.iterdir() if root.is_dir() else ()):
        if entry.is_dir() and not entry.name.startswith("."):
            # a cached conversion is always one the loader accepts
            load_dataset(entry, requires=requires)


# --- the mapping TOML ---------------------------------------------------------------------------

WORDS = ["wait", "stop", "user", "input", "ms", "s", "samples", "source", "{config}/*.parquet",
         "{config}/{split}-*.parquet", "{", "}", "{0}", "{other}", "user_start", "cue_start",
         "times.user_onset_ms", "sample_id", "AMI", "real", "casual", "inter_sentential_pause",
         "key", "unit", "units", "rate", "origin", "keys", "values", "files", ""]
scalars = (st.sampled_from(WORDS) | st.text(max_size=6) | st.integers(-3, 10**20)
           | st.floats() | st.booleans())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=4), inner,
                                        max_size=3), max_leaves=8)
names = st.sampled_from(WORDS + ["annotation", "colums", "conditions", "text", "id", "corpus",
                                 "scenario", "audio", "version"]) | st.text(max_size=6)
# the bundled mapping with the test's keys over it: mutations reach every table
BASE = _merge(tomllib.loads(files("pytest_duplexact.released").joinpath("mapping.toml")
                            .read_text(encoding="utf-8")), tomllib.loads(TEST_MAPPING))


def _paths(d, prefix=()):
    """Every key path of a parsed mapping (into candidate tables too)."""
    for k, v in d.items():
        yield prefix + (k,)
        if isinstance(v, dict):
            yield from _paths(v, prefix + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield prefix + (k, i)
                if isinstance(x, dict):
                    yield from _paths(x, prefix + (k, i))


PATHS = list(_paths(BASE))


@st.composite
def mutated_mappings(draw):
    """The test mapping with one to three values replaced, keys renamed or deleted."""
    d = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = d
        try:
            for p in path[:-1]:
                parent = parent[p]
            parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed it
        op = draw(st.sampled_from(["value", "rename", "delete"]))
        if op == "value":
            parent[path[-1]] = draw(values)
        elif isinstance(parent, dict):
            v = parent.pop(path[-1])
            if op == "rename":
                parent[draw(names)] = v
    return d


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes are TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(map(_toml, v)) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(x)}" for k, x in v.items()) + "}"


def _document(d: dict) -> str:
    return "".join(f"{json.dumps(str(k))} = {_toml(v)}\n" for k, v in d.items())


@pytest.fixture(scope="module")
def snap(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzz") / "snap"
    write_rows(d, [wait_row("a"), wait_row("b")])
    return d


@_fuzz(150)
@given(mutated_mappings() | st.dictionaries(names, values, max_size=4))
def test_any_mapping_file_loads_or_names_its_field(snap, doc):
    with tempfile.TemporaryDirectory() as d, _fresh_cache():
        f = Path(d) / "m.toml"
        # lone surrogates become bytes that are not UTF-8: refused as such
        f.write_bytes(_document(doc).encode("utf-8", "surrogatepass"))
        try:
            m = load_mapping(f)
        except MappingError as e:
            msg = str(e)
            assert msg.startswith((f"{f}: ", f"mapping.toml + {f}: ")), msg
            assert "field '" in msg or "not valid TOML" in msg or "not UTF-8" in msg, msg
            return
        try:  # a mapping that loads also maps the rows without a traceback
            total, _ = plan(resolve_snapshot(str(snap), m), m)
        except ReleasedDataError as e:
            assert str(snap) in str(e), str(e)
            return
        assert total == 2


# --- parquet metadata values ----------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=10)
times = st.fixed_dictionaries({}, optional={
    "user_onset_ms": json_values | st.floats(-1e4, 2e3), "user_offset_ms":
        json_values | st.floats(-1e4, 2e3) | st.sampled_from([1e300, 900, "800", -0.0])})
metadata = st.fixed_dictionaries({}, optional={
    "sample_id": json_values | st.sampled_from(["x", "X", "ok", "a/b", "..", "x" * 300, " "]),
    "transcript": json_values | st.just("hi there"),
    "times": times | json_values,
    "scenario": json_values | st.sampled_from(["Casual", "meeting", "podcast"]),
    "extra": json_values})
raw_metadata = (metadata.map(json.dumps) | st.text(max_size=20)
                | st.just('{"a": ' * 3000 + "1" + "}" * 3000))


@_fuzz(30)
@given(raw_metadata)
def test_any_metadata_converts_or_names_the_row(raw):
    with tempfile.TemporaryDirectory() as d, _fresh_cache() as cache:
        snap, mapping = Path(d) / "snap", Path(d) / "m.toml"
        write_rows(snap, [wait_row("ok"), {**wait_row("fz"), "metadata": raw}])
        mapping.write_text(TEST_MAPPING)
        try:
            ids = {i.id for i in load_dataset(resolve_data(f"hf:{snap}", mapping),
                                              requires=requires).instances}
            assert len(ids) == 2 and "wait-ok" in ids
        except ReleasedDataError as e:
            msg = str(e)
            assert "cannot place 1 of 2 row(s)" in msg and f"({WAIT_FILE} row 1)" in msg, msg
        _every_entry_loads(cache)
        root = resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
        assert "wait-ok" in {i.id for i in load_dataset(root, requires=requires).instances}
        assert resolve_data(f"hf:{snap}", mapping, skip_unmappable=True) == root  # reused
        _every_entry_loads(cache)


# --- list indices in mapping keys (issue 32 item 15) ------------------------------------------

plain_keys = st.text("abcxyz_", min_size=1, max_size=3)
nested = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=3),
    max_leaves=16)


@_fuzz(300)
@given(st.dictionaries(plain_keys, nested, max_size=4))
def test_every_key_inspect_shows_is_one_the_mapping_reaches(meta):
    """What ``duplexact inspect`` lists (dotted objects, indexed lists, down to the leaves) is
    exactly what ``lookup`` finds: a user copies a key from its output into the mapping."""
    from pytest_duplexact.released.inspect import _flatten
    from pytest_duplexact.released.mapping import lookup

    for key, value in _flatten(meta):
        assert lookup(meta, key) == value
        assert not (isinstance(value, (list, dict)) and value), key  # down to the leaves


@_fuzz(30)
@given(st.lists(json_values | st.floats(-1e4, 2e3), max_size=4), st.integers(0, 5),
       st.integers(0, 5))
@example([100.0, 900.0], 0, 1)
def test_indexed_keys_into_any_list_convert_or_name_the_row(interval, start, end):
    with tempfile.TemporaryDirectory() as d, _fresh_cache() as cache:
        snap, mapping = Path(d) / "snap", Path(d) / "m.toml"
        write_rows(snap, [wait_row("ok"), wait_row("fz", times={}, interval=interval)])
        mapping.write_text(TEST_MAPPING.replace(
            '"times.user_onset_ms", unit = "ms" }]',
            f'"times.user_onset_ms", unit = "ms" }}, {{ key = "interval[{start}]", '
            'unit = "ms" }]').replace(
            '"times.user_offset_ms", unit = "ms" }]',
            f'"times.user_offset_ms", unit = "ms" }}, {{ key = "interval[{end}]", '
            'unit = "ms" }]'))
        try:
            ids = {i.id for i in load_dataset(resolve_data(f"hf:{snap}", mapping),
                                              requires=requires).instances}
            assert ids == {"wait-ok", "wait-fz"}
        except ReleasedDataError as e:
            msg = str(e)
            assert "cannot place 1 of 2 row(s)" in msg and f"({WAIT_FILE} row 1)" in msg, msg
        _every_entry_loads(cache)
