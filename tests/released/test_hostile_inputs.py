"""Hostile released-data inputs (issue 22, bugs 6-9 and 11): each becomes a message naming the
parquet file, row and column, or an unmappable row the user can skip; never a traceback, an
INTERNALERROR or a cache entry that fails later. Snapshots are one small parquet file built
here (tests/released/snapshot_builder.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data import audio
from pytest_duplexact.data.instance import load_dataset
from pytest_duplexact.released import ReleasedDataError, resolve_data
from pytest_duplexact.rules import requires
from tests.released.snapshot_builder import (
    WAIT_FILE,
    build,
    wait_row,
    wav_bytes,
    write_rows,
)


def _refused(snap: Path, mapping: Path) -> str:
    with pytest.raises(ReleasedDataError) as e:
        resolve_data(f"hf:{snap}", mapping)
    return str(e.value)


def _entries(cache: Path) -> list[Path]:
    """Conversions in the cache (not the temporary folders of one being written)."""
    root = cache / "released"
    return [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")] \
        if root.is_dir() else []


# --- bug 6: crashes become messages naming the file, row and column ---------------------------

def test_deeply_nested_metadata_is_an_unmappable_row(tmp_path, mapping, cache, capsys):
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("ok"), {**wait_row("deep"), "metadata": deep}])
    msg = _refused(snap, mapping)
    assert "cannot place 1 of 2 row(s)" in msg
    assert f"config wait, metadata: 1 row(s) [wait-00001 ({WAIT_FILE} row 1)]" in msg
    assert "nested too deeply" in msg
    root = resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
    assert [i.id for i in load_dataset(root, requires=requires).instances] == ["wait-ok"]
    from pytest_duplexact.cli import main

    assert main(["inspect", f"hf:{snap}"]) == 0
    assert "1 rows without a JSON object" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["binary", "string", "list<int>", "struct<bytes: string>"])
def test_audio_column_of_another_type_names_file_and_column(tmp_path, mapping, cache, kind):
    import pyarrow as pa

    arrow_type, value = {
        "binary": (pa.binary(), b"RIFF"),
        "string": (pa.string(), "input.wav"),
        "list<int>": (pa.list_(pa.int64()), [1, 2, 3]),
        "struct<bytes: string>": (pa.struct([("bytes", pa.string()), ("path", pa.string())]),
                                  {"bytes": "RIFF....", "path": "x.wav"}),
    }[kind]
    snap = tmp_path / "snap"
    f = write_rows(snap, [{**wait_row(), "input": value}], input_type=arrow_type)
    msg = _refused(snap, mapping)
    assert str(f) in msg and "column 'input'" in msg
    assert f"is {kind.split('<')[0]}" in msg and "struct<bytes: binary, path: string>" in msg
    assert "[audio.wait]" in msg
    assert not _entries(cache)


def test_a_file_without_the_mapped_columns_names_them(tmp_path, mapping, cache):
    import pyarrow.parquet as pq

    f = write_rows(tmp_path / "snap", [wait_row("a")])
    pq.write_table(pq.read_table(f).drop_columns(["condition", "metadata"]), f)
    msg = _refused(tmp_path / "snap", mapping)
    assert f"config wait, condition: 1 row(s) [wait-00000 ({WAIT_FILE} row 0)]: the file has " \
        "no column 'condition' ([columns] condition)" in msg
    assert "no column 'metadata' ([columns] metadata)" in msg


def test_float_wav_with_nan_samples_is_an_unmappable_row(tmp_path, mapping, cache):
    x = np.zeros(audio.SAMPLE_RATE, dtype=np.float32)
    x[100:200] = np.nan
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("nan", audio_bytes=wav_bytes(x, audio.SAMPLE_RATE, "FLOAT"))])
    msg = _refused(snap, mapping)
    assert f"config wait, audio.user: 1 row(s) [wait-nan ({WAIT_FILE} row 0)]: column " \
        "input: samples are not finite (NaN or infinity)" in msg


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_unreadable_parquet_names_the_file(tmp_path, mapping, cache, damage, capsys):
    snap = tmp_path / "snap"
    f = write_rows(snap, [wait_row("a"), wait_row("b")])
    data = f.read_bytes()
    f.write_bytes(b"not a parquet file at all" * 10 if damage == "garbage"
                  else data[: len(data) // 2])
    msg = _refused(snap, mapping)
    assert f"{f}: not a readable parquet file" in msg
    from pytest_duplexact.cli import main

    assert main(["inspect", f"hf:{snap}"]) == 1
    assert f"{f}: not a readable parquet file" in capsys.readouterr().err


_FULL_DISK = """
import resource, signal, sys
from pytest_duplexact.released import ReleasedDataError, resolve_data
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
try:
    resolve_data("hf:" + sys.argv[1], sys.argv[2])
except ReleasedDataError as e:
    print(e)
    sys.exit(3)
"""


def test_a_full_cache_disk_is_a_message_and_leaves_nothing(tmp_path, mapping, cache):
    """A file-size limit makes the kernel refuse the writes, as a full disk does."""
    snap = tmp_path / "snap"
    x = np.random.default_rng(1).standard_normal(audio.SAMPLE_RATE * 2) * 0.3
    write_rows(snap, [wait_row("big", user_offset_ms=1900,
                               audio_bytes=wav_bytes(x, audio.SAMPLE_RATE))])
    # no bytecode writing under the limit: CPython renames a .pyc cut short at 20,000 bytes
    # into __pycache__ (it never checks the short write), and every later import of that
    # module in the checkout fails with "marshal data too short"
    res = subprocess.run([sys.executable, "-c", _FULL_DISK, str(snap), str(mapping)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert res.returncode == 3, res.stdout + res.stderr
    assert "cannot write the converted data" in res.stdout
    assert "File too large" in res.stdout and "DUPLEXACT_CACHE_DIR" in res.stdout
    assert "Traceback" not in res.stderr and "System error" not in res.stdout
    assert not _entries(cache) and not list((cache / "released").glob(".tmp-*"))


@pytest.mark.parametrize("memo", ['[1, 2]', '{"x": 5}', '"text"', '{"a": null}', "{{{"])
def test_a_corrupt_hash_memo_is_a_cache_miss_and_rebuilt(tmp_path, mapping, cache, memo):
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("a")])
    f = cache / "released" / "file-hashes.json"
    f.parent.mkdir(parents=True)
    f.write_text(memo)
    root = resolve_data(f"hf:{snap}", mapping)
    assert [i.id for i in load_dataset(root, requires=requires).instances] == ["wait-a"]
    rebuilt = json.loads(f.read_text())
    assert isinstance(rebuilt, dict) and all(isinstance(v, str) for v in rebuilt.values())
    assert resolve_data(f"hf:{snap}", mapping) == root  # and the next run reads it


@pytest.mark.parametrize("damage", ["header not JSON", "header without released",
                                    "unmappable rows not objects", "unmappable missing"])
def test_a_damaged_cached_conversion_is_rebuilt(tmp_path, mapping, cache, damage):
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("a")])
    root = resolve_data(f"hf:{snap}", mapping)
    header, unmappable = root / "dataset.json", root / "unmappable.json"
    if damage == "header not JSON":
        header.write_text("{")
    elif damage == "header without released":
        header.write_text('{"format": "duplexact-dataset", "version": 1, "released": {}}')
    elif damage == "unmappable rows not objects":
        unmappable.write_text('{"rows": 1, "unmappable": [1]}')
    else:
        unmappable.unlink()
    assert resolve_data(f"hf:{snap}", mapping) == root
    from pytest_duplexact.pytest_plugin.released_data import describe

    assert describe(root, f"hf:{snap}")["instances"] == 1
    assert [i.id for i in load_dataset(root, requires=requires).instances] == ["wait-a"]


# --- bug 7: each row's values are checked at conversion ---------------------------------------

def _one_hz_wav() -> bytes:  # 2000 frames at 1 Hz: 2000 s from a 4 kB file
    return wav_bytes(np.zeros(2000, dtype=np.int16), 1)


BAD_ROWS = {
    "negative": (dict(user_onset_ms=-500), "annotations.user_start", "outside the user audio"),
    "huge": (dict(user_offset_ms=1e300), "annotations.user_end", "outside the user audio"),
    "swapped": (dict(user_onset_ms=900, user_offset_ms=100), "annotations.user_end",
                "is before user_start"),
    "zero_frames": (dict(audio_bytes=wav_bytes(np.zeros(0, dtype=np.int16), 16_000)),
                    "audio.user", "column input: no samples"),
    "one_hz": (dict(audio_bytes=_one_hz_wav()), "audio.user",
               "column input: lasts 2000 s (from its header), over the 600 s limit"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_rows_the_loader_would_reject_are_unmappable(tmp_path, mapping, cache, case, capsys):
    over, field_, why = BAD_ROWS[case]
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("good"), wait_row("bad", **over)])
    msg = _refused(snap, mapping)
    assert "cannot place 1 of 2 row(s)" in msg, msg
    assert f"config wait, {field_}: 1 row(s) [wait-bad ({WAIT_FILE} row 1)]" in msg, msg
    assert why in msg and "instances.jsonl" not in msg
    assert not re.search(r"\d{20}", msg), msg  # 1e300 printed readably
    assert not _entries(cache)
    root = resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
    assert [i.id for i in load_dataset(root, requires=requires).instances] == ["wait-good"]
    # duplexact import: refused without leaving the folder, converted with the switch
    from pytest_duplexact.cli import main

    out = tmp_path / "out"
    assert main(["import", str(snap), "--out", str(out), "--mapping", str(mapping)]) == 1
    assert "wait-bad" in capsys.readouterr().err and not out.exists()
    assert main(["import", str(snap), "--out", str(out), "--mapping", str(mapping),
                 "--skip-unmappable"]) == 0
    assert [i.id for i in load_dataset(out, requires=requires).instances] == ["wait-good"]


# --- bug 8: duplicate ids never collide after suffixing ---------------------------------------

def test_duplicate_ids_stay_distinct_after_suffixing(tmp_path, mapping, cache):
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("x-00002"), wait_row("x"), wait_row("x"), wait_row("X")])
    ids = [i.id for i in load_dataset(resolve_data(f"hf:{snap}", mapping),
                                      requires=requires).instances]
    assert len({i.lower() for i in ids}) == 4, ids
    assert ids[:2] == ["wait-x-00002", "wait-x"]


# --- bug 9: the length comes from the audio header, before anything is decoded ----------------

def test_a_decompression_bomb_is_refused_from_its_header(tmp_path, mapping, cache, monkeypatch):
    import soundfile as sf

    rate = 8_000
    bomb = wav_bytes(np.zeros(rate * 700, dtype=np.int16), rate, fmt="FLAC")  # 700 s, ~70 kB
    assert len(bomb) < 200_000
    snap = tmp_path / "snap"
    write_rows(snap, [wait_row("ok"), wait_row("bomb", audio_bytes=bomb)])
    decoded: list[int] = []
    real_read = sf.read

    def spy(*a, **kw):
        data, sr = real_read(*a, **kw)
        decoded.append(len(data))
        return data, sr

    monkeypatch.setattr(sf, "read", spy)
    msg = _refused(snap, mapping)
    assert f"config wait, audio.user: 1 row(s) [wait-bomb ({WAIT_FILE} row 1)]: column " \
        "input: lasts 700 s (from its header), over the 600 s limit" in msg
    assert decoded and max(decoded) <= audio.SAMPLE_RATE  # only the 1 s clip was decoded


# --- bug 11: configs the snapshot does not have ----------------------------------------------

def test_missing_config_folders_name_the_absent_actions(pytester, tmp_path, mapping, cache,
                                                        capsys):
    import shutil

    snap = tmp_path / "snap"
    build(snap, per_config=1)
    shutil.rmtree(snap / "stop")
    shutil.rmtree(snap / "hold_floor")
    base = [f"--duplexact-data=hf:{snap}", f"--duplexact-data-mapping={mapping}",
            "--duplexact-model=silent", "--collect-only", "-q", "-p", "no:cacheprovider"]
    res = pytester.runpytest(*base)
    assert res.ret == 4
    err = res.stderr.str()
    assert "the snapshot has no parquet file for config(s) hold_floor (action hold_floor), " \
        "stop (action stop)" in err
    others = "wait,ignore,take_turn,backchannel,interrupt,recover"
    assert f"--duplexact-action={others}" in err
    res = pytester.runpytest(*base, f"--duplexact-action={others}")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    assert len([ln for ln in res.stdout.lines if "::" in ln]) == 6
    from pytest_duplexact.pytest_plugin.released_data import describe

    root = resolve_data(f"hf:{snap}", mapping)
    assert describe(root, f"hf:{snap}")["absent_configs"] == {"hold_floor": "hold_floor",
                                                              "stop": "stop"}
    from pytest_duplexact.cli import main

    assert main(["inspect", f"hf:{snap}"]) == 0
    assert "no parquet file for config(s) hold_floor (action hold_floor), stop (action " \
        "stop)" in capsys.readouterr().err
    assert main(["import", str(snap), "--out", str(tmp_path / "out"), "--mapping",
                 str(mapping)]) == 0
    assert "duplexact import: warning: the snapshot has no parquet file for config(s) " \
        "hold_floor" in capsys.readouterr().err


@pytest.mark.parametrize("stage", ["plan", "loader"])
def test_importing_only_unmappable_rows_says_so_in_one_line(tmp_path, mapping, cache, capsys,
                                                            stage):
    """Every row skipped, whether the metadata pass finds them (metadata not JSON) or the
    loader's checks once decoded (a time outside its clip): one line saying all the rows are
    unmappable and what to do, naming no instances.jsonl (a file never written), no folder
    left behind, and with the option names of the command used."""
    from pytest_duplexact.cli import main

    snap = tmp_path / "snap"
    bad = {"plan": {**wait_row("bad"), "metadata": "not json"},
           "loader": wait_row("bad", user_offset_ms=5000)}[stage]  # the clip lasts 1 s
    write_rows(snap, [bad, bad])
    out = tmp_path / "out"
    assert main(["import", str(snap), "--out", str(out), "--mapping", str(mapping),
                 "--skip-unmappable"]) == 1
    err = capsys.readouterr().err
    said = [ln for ln in err.splitlines() if "warning" not in ln and "converted" not in ln]
    assert said == [f"duplexact import: hf:{snap.resolve()}: all 2 row(s) of the released data "
                    f"are unmappable with the mapping (mapping.toml + {mapping}), so no instance "
                    "is left: check the mapping (`duplexact inspect SOURCE` shows the metadata "
                    "keys; docs/released-data.md); without --skip-unmappable the refusal lists "
                    "the rows by config and missing field"], err
    assert "instances.jsonl" not in err and not out.exists()
    assert ("converted wait/" in err) == (stage == "loader")  # refused before any audio, or after
    # the run's path: the same line with pytest's option names, and nothing cached
    with pytest.raises(ReleasedDataError) as e:
        resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
    assert str(e.value).startswith("all 2 row(s) of the released data are unmappable")
    assert "without --duplexact-skip-unmappable the refusal" in str(e.value)
    assert not _entries(cache)


def test_an_empty_conversion_an_older_release_cached_is_refused_too(tmp_path, mapping, cache):
    """A cached conversion whose rows were all skipped (an older release kept one) says the
    same line, not the loader's ``instances.jsonl: no instances`` on a cache path."""
    from pytest_duplexact.released import convert

    snap = tmp_path / "snap"
    write_rows(snap, [{**wait_row("bad"), "metadata": "not json"}, wait_row("good")])
    root = resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
    stored = json.loads((root / convert.UNMAPPABLE_FILE).read_text())
    assert stored["rows"] == 2 and len(stored["unmappable"]) == 1
    stored["unmappable"].append({**stored["unmappable"][0], "id": "wait-good", "row": 1})
    (root / convert.UNMAPPABLE_FILE).write_text(json.dumps(stored))  # as if both skipped
    (root / "instances.jsonl").write_text("")
    with pytest.raises(ReleasedDataError, match=r"^all 2 row\(s\) of the released data are "
                                                "unmappable"):
        resolve_data(f"hf:{snap}", mapping, skip_unmappable=True)
