"""``duplexact merge`` against hostile shard reports and a careless ``-o``: each refusal is
one line naming the file and the field, exit 2 (as every refused report), never a
traceback, and no shard report is ever overwritten."""

from __future__ import annotations

import argparse
import json

import pytest

from pytest_duplexact.report.store.merge import main
from tests.report.store.test_merge import _edit, _shards


def _merge(paths, output, capsys) -> tuple[int, str]:
    rc = main(argparse.Namespace(reports=[str(p) for p in paths], output=str(output)))
    err = capsys.readouterr().err
    return rc, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _estimate():
    return {"instances": 3, "stream_s": [1.0, 2.0], "output_window_s": 1.0,
            "model_kind": "stepped", "concurrency": 1, "workers": 1, "wall_s": None,
            "cost": {"currency": "USD", "as_of": "x", "source": "bundled",
                     "services": {"model": {"model": "m", "cost": [0.0, 0.0], "basis": "b"}},
                     "total": [0.0, 0.0], "complete": True}, "previous_run": None}


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(usage=[1]), "'usage' is not an object of objects"),
    (lambda d: d.update(usage={"model": {"model": "m", "tokens": 10 ** 400}}),
     "'usage.model.tokens' is 1000000"),
    (lambda d: d.update(estimate={**_estimate(), "cost": {"total": [0, 0]}}),
     "'estimate.cost.complete'"),
    (lambda d: d.update(estimate={"instances": 3}), "'estimate.stream_s' is None"),
    (lambda d: d.update(estimate=[]), "'estimate' is []"),
    (lambda d: d.update(notes="one note"), "'notes' is 'one note'"),
    (lambda d: d.update(extra=[1, 2]), "'extra' is [1, 2]"),
    (lambda d: d.update(model=["toy"]), "'model' is ['toy']"),
    (lambda d: d.update(settings="toy"), "'settings' is 'toy'"),
    (lambda d: d["settings"]["selection"].update(shard="3/2"),
     "field 'settings.selection': shard must be K/N with 1 <= K <= N, got 3/2"),
    (lambda d: d["settings"]["selection"].update(shard="auto"),
     "field 'settings.selection.shard' is 'auto'"),
])
def test_a_malformed_field_is_one_line_naming_file_and_field(tmp_path, capsys, edit, field):
    _, paths = _shards(tmp_path, n=2)
    for p in paths:  # a valid estimate in both, so the one edited is the only fault
        _edit(p, lambda d: d.update(estimate=_estimate()))
    _edit(paths[1], edit)
    rc, err = _merge(paths, tmp_path / "merged.json", capsys)
    line = _one_line(err)
    assert rc == 2 and line.startswith(f"duplexact merge: {paths[1]}: ") and field in line, line
    assert not (tmp_path / "merged.json").exists()


def test_json_nested_100000_deep_is_one_line(tmp_path, capsys):
    _, paths = _shards(tmp_path, n=2)
    paths[1].write_text('{"extra": ' + "[" * 100_000 + "]" * 100_000 + "}")
    rc, err = _merge(paths, tmp_path / "merged.json", capsys)
    assert rc == 2 and f"{paths[1]}: not a readable JSON report (nested more than 64 " \
        "deep)" in _one_line(err)


def test_output_a_directory_is_refused(tmp_path, capsys):
    _, paths = _shards(tmp_path, n=2)
    rc, err = _merge(paths, tmp_path, capsys)
    assert rc == 2 and f"cannot write -o {tmp_path}: {tmp_path} is a folder: give a file " \
        f"name, e.g. -o {tmp_path / 'report.json'}" in _one_line(err)


def test_output_under_a_file_is_one_line(tmp_path, capsys):
    _, paths = _shards(tmp_path, n=2)
    rc, err = _merge(paths, paths[0] / "merged.json", capsys)
    assert rc == 2 and "cannot write -o" in _one_line(err)


def test_output_equal_to_a_shard_report_never_overwrites_it(tmp_path, capsys, monkeypatch):
    _, paths = _shards(tmp_path, n=2)
    before = paths[1].read_bytes()
    monkeypatch.chdir(paths[1].parent)  # the same file by another name
    rc, err = _merge(paths, "report.json", capsys)
    assert rc == 2 and f"cannot write -o report.json: it is the input {paths[1]}; give " \
        "another file name" in _one_line(err)
    assert paths[1].read_bytes() == before


def test_shard_3_of_2_is_named_not_called_missing(tmp_path, capsys):
    _, paths = _shards(tmp_path, n=2)
    _edit(paths[1], lambda d: d["settings"]["selection"].update(shard="3/2"))
    rc, err = _merge(paths, tmp_path / "m.json", capsys)
    line = _one_line(err)
    assert rc == 2 and "3/2" in line and "missing" not in line and str(paths[1]) in line
    json.loads(paths[0].read_text())  # untouched
