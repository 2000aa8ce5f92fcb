"""The minor round of issue 22: what a killed conversion leaves is cleaned, and ``duplexact
inspect`` says a column's audio is unreadable rather than "empty in all 0 rows"."""

from __future__ import annotations

import os
import time
from collections import Counter

from pytest_duplexact.released.inspect import ConfigInfo, render
from pytest_duplexact.released.snapshot import Snapshot, clean_stale_conversions


def test_stale_conversion_folders_are_removed_and_live_ones_kept(tmp_path):
    stale, live = tmp_path / ".tmp-killed", tmp_path / ".tmp-running"
    for folder in (stale, live):
        (folder / "instances" / "a").mkdir(parents=True)
        (folder / "instances" / "a" / "input.wav").write_bytes(b"x")
    done = tmp_path / "0123abcd"  # a finished conversion is never touched
    done.mkdir()
    old = time.time() - 2 * 3600
    for d, dirs, names in os.walk(stale):
        for n in dirs + names:
            os.utime(os.path.join(d, n), (old, old))
    os.utime(stale, (old, old))
    assert clean_stale_conversions(tmp_path) == [stale]
    assert not stale.exists() and live.is_dir() and done.is_dir()


def test_inspect_names_unreadable_audio(tmp_path):
    info = ConfigInfo("wait", "wait", ["wait/test.parquet"], rows=3)
    info.audio["audio"] = {"rates": Counter(), "channels": Counter(), "n": 0, "empty": 0,
                           "unreadable": 3, "total_s": 0.0, "min_s": None, "max_s": None}
    text = render(Snapshot(tmp_path, "x", None, {}, {}), [info])
    assert "audio audio: no readable clip: 3 unreadable" in text
    assert "empty in all 0 rows" not in text


def test_a_list_in_metadata_is_placed_by_index_and_inspect_names_the_indexed_keys(tmp_path,
                                                                                  capsys,
                                                                                  monkeypatch):
    """``"pause_interval_ms": [onset, offset]``: the mapping reaches each end by index, and
    ``duplexact inspect`` shows the keys it would write (issue 32 item 15)."""
    from pytest_duplexact.cli import main
    from pytest_duplexact.data.instance import load_dataset
    from pytest_duplexact.released import resolve_data
    from pytest_duplexact.rules import requires
    from tests.released.snapshot_builder import wait_row, write_rows

    snap = tmp_path / "snap"
    row = wait_row("listed", times={}, user_interval_ms=[100, 900])
    write_rows(snap, [row])
    mapping = tmp_path / "m.toml"
    mapping.write_text('[annotations]\n'
                       'user_start = [{ key = "user_interval_ms[0]", unit = "ms" }]\n'
                       'user_end = [{ key = "user_interval_ms[1]", unit = "ms" }]\n'
                       '[text]\nuser = ["transcript"]\n[id]\nkeys = ["sample_id"]\n')
    monkeypatch.setenv("DUPLEXACT_CACHE_DIR", str(tmp_path / "cache"))
    (inst,) = load_dataset(resolve_data(f"hf:{snap}", mapping), requires=requires).instances
    assert (inst.annotations.user_start, inst.annotations.user_end) == (0.1, 0.9)
    capsys.readouterr()
    assert main(["inspect", f"hf:{snap}", "--mapping", str(mapping)]) == 0
    out = capsys.readouterr().out
    assert "    user_interval_ms[0]: 1/1 rows, e.g. 100" in out
    assert "    user_interval_ms[1]: 1/1 rows, e.g. 900" in out
