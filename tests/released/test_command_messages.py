"""What ``duplexact import`` / ``inspect`` / ``validate`` say of a newcomer's mistakes with the
released data: one line each, naming the path and the command's own options, the source
named once, and what to do; the pytest path keeps its ``--duplexact-*`` names. The ids the
docs describe are the ids the conversion writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_duplexact.cli import main
from pytest_duplexact.data.instance import load_dataset
from pytest_duplexact.released import ReleasedDataError, resolve_data
from pytest_duplexact.rules import requires
from tests.released.snapshot_builder import wait_row, write_rows

DOCS = Path(__file__).resolve().parents[2] / "docs" / "released-data.md"


@pytest.fixture
def snap(tmp_path) -> Path:
    folder = tmp_path / "snap"
    write_rows(folder, [wait_row("a"), wait_row("b")])
    return folder


def _err_lines(capsys) -> list[str]:
    """stderr minus the absent-configs warning every import of a one-config snapshot says."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if "warning: the snapshot has no parquet" not in ln]


# --- defect 1: --out a file, under a file, a folder holding files -----------------------------

@pytest.mark.parametrize("given, why", [
    ("afile", "a file, not a folder"),
    ("afile/sub", "afile is a file, not a folder"),
    ("full", "exists and is not empty"),
])
def test_import_out_that_cannot_be_a_new_folder_is_one_line(snap, mapping, cache, tmp_path,
                                                           capsys, monkeypatch, given, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["import", f"hf:{snap}", "--mapping", str(mapping), "--out", given]) == 1
    assert _err_lines(capsys) == [
        f"duplexact import: --out {given}: {why}; give a new or empty folder with --out DIR"
        + (" (nothing is written over files)" if given == "full" else "")]
    assert (tmp_path / "afile").read_text() == "mine"
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    assert not (cache / "released").exists() or not any((cache / "released").iterdir())


def test_import_into_an_empty_folder_still_works(snap, mapping, cache, tmp_path, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["import", f"hf:{snap}", "--mapping", str(mapping), "--out", str(out)]) == 0
    assert [i.id for i in load_dataset(out, requires=requires).instances] == ["wait-a",
                                                                              "wait-b"]


def test_a_write_that_fails_during_import_points_at_out(snap, mapping, cache, tmp_path,
                                                        capsys, monkeypatch):
    """A full disk while importing: the advice is the command's --out, not the conversion
    cache (DUPLEXACT_CACHE_DIR), which `duplexact import` does not write."""
    import errno

    from pytest_duplexact.released import convert

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(convert, "_write_clip", full)
    out = tmp_path / "out"
    assert main(["import", f"hf:{snap}", "--mapping", str(mapping), "--out", str(out)]) == 1
    assert _err_lines(capsys)[-1] == (
        f"duplexact import: hf:{snap}: cannot write the converted data to {out}: No space left "
        "on device (a full disk? give another folder with --out DIR)")
    assert not out.exists()


# --- defect 2: the command's own option names; the source said once ---------------------------

def test_import_refusal_names_the_commands_own_options(snap, tmp_path, cache, capsys):
    out = tmp_path / "out"
    assert main(["import", f"hf:{snap}", "--out", str(out)]) == 1  # bundled mapping only
    err = "\n".join(_err_lines(capsys))
    assert "pass it with --mapping=FILE" in err and "leave these rows out" in err
    assert err.endswith(": --skip-unmappable."), err
    assert "--duplexact-" not in err and not out.exists()


def test_the_pytest_path_keeps_the_pytest_option_names(snap, cache, tmp_path):
    with pytest.raises(ReleasedDataError) as e:
        resolve_data(f"hf:{snap}")
    assert "pass it with --duplexact-data-mapping=FILE" in str(e.value)
    assert str(e.value).endswith(": --duplexact-skip-unmappable.")
    with pytest.raises(ReleasedDataError, match=r"^--duplexact-data-mapping=.*nothere\.toml: "
                                                r"cannot be read \(No such file or directory\)"):
        resolve_data(f"hf:{snap}", tmp_path / "nothere.toml")
    with pytest.raises(ReleasedDataError, match=r"^no parquet file of any mapped config .*"
                                                r"\(set \[source\]\.files in a mapping file "
                                                r"passed with --duplexact-data-mapping\)$"):
        resolve_data(f"hf:{tmp_path}/dx-cache")


def test_inspect_mapping_that_cannot_be_read(snap, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", f"hf:{snap}", "--mapping", "nothere.toml"]) == 1
    assert _err_lines(capsys) == [
        "duplexact inspect: --mapping=nothere.toml: cannot be read (No such file or directory); "
        "give the path of an existing TOML mapping file"]


@pytest.mark.parametrize("given, why", [("nothere", "no such folder"),
                                        ("afile", "a file, not a folder")])
def test_a_source_that_is_not_a_folder_is_named_once(tmp_path, capsys, given, why):
    (tmp_path / "afile").write_text("x")
    source = f"hf:{tmp_path / given}"
    assert main(["inspect", source]) == 1
    assert _err_lines(capsys) == [
        f"duplexact inspect: {source}: {why}; give hf:/path/to/the/folder of the snapshot's "
        "parquet files, or hf:OWNER/NAME"]


def test_a_folder_without_parquet_names_the_mapping_option_once(tmp_path, cache, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["import", f"hf:{empty}", "--out", str(tmp_path / "out")]) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"duplexact import: hf:{empty}: no parquet file of any mapped "
                           f"config (wait, ")
    assert line.count(f"hf:{empty}") == 1
    assert line.endswith("(set [source].files in a mapping file passed with --mapping)")


def test_an_audio_column_of_another_type_names_the_mapping_option(tmp_path, mapping, cache,
                                                                   capsys):
    import pyarrow as pa

    snap = tmp_path / "snap"
    write_rows(snap, [{**wait_row(), "input": b"RIFF"}], input_type=pa.binary())
    assert main(["import", f"hf:{snap}", "--mapping", str(mapping), "--out",
                 str(tmp_path / "out")]) == 1
    (line,) = _err_lines(capsys)
    assert "column 'input' is binary" in line
    assert line.endswith("remove it there (a mapping file passed with --mapping) if it holds "
                         "no audio")


# --- defect 5: validate given a released snapshot -------------------------------------------

def _hint(source: str) -> str:
    return (f"a released parquet snapshot, not a dataset folder: `duplexact inspect {source}` "
            f"shows what it holds, `duplexact import {source} --out DIR` converts it (then "
            f"validate DIR), or a run reads it as it is with --duplexact-data={source}")


@pytest.mark.parametrize("form", ["folder", "hf:folder", "hf:repo"])
def test_validate_points_a_snapshot_at_inspect_and_import(snap, capsys, form):
    given = {"folder": str(snap), "hf:folder": f"hf:{snap}",
             "hf:repo": "hf:LincolnD/DuplexAct"}[form]
    assert main(["validate", given]) == 1
    source = given if given.startswith("hf:") else f"hf:{given}"
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"duplexact validate: {given}: {_hint(source)}"]
    assert out.out == ""


def test_validate_of_a_converted_folder_gives_no_such_hint(snap, mapping, cache, tmp_path,
                                                           capsys):
    """A dataset folder with its instances.jsonl is validated as always, whatever else it
    holds (a parquet copy beside it)."""
    out = tmp_path / "out"
    assert main(["import", f"hf:{snap}", "--mapping", str(mapping), "--out", str(out)]) == 0
    (out / "extra.parquet").write_bytes((snap / "wait" / "test-00000-of-00001.parquet")
                                        .read_bytes())
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0
    res = capsys.readouterr()
    assert "valid duplexact-dataset v1" in res.out and "released parquet" not in res.err


# --- defect 4: the ids the docs describe -------------------------------------------------------

def test_the_documented_ids_are_the_ones_written(tmp_path, mapping, cache):
    """docs/released-data.md: ``<config>-<[id] value>``, else ``<config>-<row, 5 digits>``."""
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    example = re.search(r"`sample_id` `([^`]+)` in config `wait` gives the id `([^`]+)`", text)
    assert example, "the docs' id example moved: update this test with it"
    fallback = re.search(r"written with five digits: `(wait-\d+)`", text)
    assert fallback and "`<config>-<value>`" in text
    snap = tmp_path / "snap"
    rows = [wait_row(example.group(1)), wait_row("b"), wait_row("c"), wait_row("d")]
    row = int(fallback.group(1).split("-")[1])
    rows[row] = {**rows[row], "metadata": rows[row]["metadata"].replace('"sample_id"', '"x"')}
    write_rows(snap, rows)
    ids = [i.id for i in load_dataset(resolve_data(f"hf:{snap}", mapping),
                                      requires=requires).instances]
    assert ids[0] == example.group(2) and ids[row] == fallback.group(1), ids
