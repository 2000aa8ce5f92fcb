"""The helpers the model bridges share (bridges/modelkit.py), below the wire."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.bridges.modelkit import (
    FrameQueue,
    ModelMissing,
    TextDeltas,
    import_model,
    local_dir,
    server_defaults,
    trial_seed,
)


# a byte-level tokenizer: ids are UTF-8 bytes, decoded as a whole (a split character is U+FFFD)
def byte_decode(ids):
    return bytes(ids).decode("utf-8", "replace")


def test_text_deltas_wait_for_a_whole_character_and_start_words():
    e_acute = "é".encode()
    t = TextDeltas(byte_decode)
    got = [t.feed(i) for i in b"Caf" + e_acute + b" ok"]
    assert got == [" C", "a", "f", "", "é", " ", "o", "k"]
    assert t.end() == ""
    # a new segment starts a new word; an unfinished character at its end is dropped
    assert t.feed(ord("x")) == " x"
    assert t.feed(e_acute[0]) == ""
    assert t.end() == ""
    assert t.feed(ord("y")) == " y"


def test_frame_queue_cuts_any_lengths_into_frames_and_counts_underruns():
    q = FrameQueue(4)
    assert q.pop().tolist() == [0, 0, 0, 0] and q.underruns == 0  # nothing yet: no underrun
    q.push(np.arange(1, 7))
    q.push(np.zeros(0))
    assert q.pop().tolist() == [1, 2, 3, 4]
    assert q.pop().tolist() == [5, 6, 0, 0] and q.underruns == 1
    q.push(np.array([7.0]))
    q.push(np.array([8.0, 9.0, 10.0, 11.0]))
    assert q.pop().tolist() == [7, 8, 9, 10] and len(q) == 1
    q.finish()  # the model stopped: its last sample, then its silence, are no gap
    assert q.pop().tolist() == [11, 0, 0, 0] and q.pop().tolist() == [0, 0, 0, 0]
    assert q.underruns == 1


def test_server_defaults_and_seeds():
    defaults = {"temperature": 0.8, "greedy": False, "mode": "window"}
    assert server_defaults(["temperature=0.5", "greedy=yes"], defaults, model="m") == \
        {"temperature": 0.5, "greedy": True, "mode": "window"}
    with pytest.raises(SystemExit, match="m bridge: --option 'temperature': expected KEY=VALUE"):
        server_defaults(["temperature"], defaults, model="m")
    with pytest.raises(SystemExit, match="m bridge: --option: option temperature: expected "
                                         "float, got 'hot'"):
        server_defaults(["temperature=hot"], defaults, model="m")
    assert trial_seed("a", 1, 0) == trial_seed("a", 1, 0) != trial_seed("b", 1, 0)
    assert trial_seed("a", 1, 0) != trial_seed("a", 2, 0) != trial_seed("a", 1, 1)


def test_missing_model_code_and_folders_say_what_to_do(tmp_path):
    with pytest.raises(ModelMissing, match="cannot import 'no_such_model_pkg'.*pip install x"):
        import_model("no_such_model_pkg", model="m", install="pip install x")
    with pytest.raises(ModelMissing, match="is not a directory"):
        import_model("model", model="m", install="", path=str(tmp_path / "nope"))
    with pytest.raises(SystemExit, match="lacks a.bin"):
        local_dir("--checkpoint", str(tmp_path), model="m", holds=("a.bin",))
    assert local_dir("--checkpoint", str(tmp_path), model="m") == tmp_path


def test_model_bridges_import_without_their_models():
    """Like the kit, each model bridge imports with the standard library, numpy and
    websockets alone: the model's own packages are imported when the server starts."""
    import subprocess
    import sys

    from tests.bridges.test_kit_imports import PROBE, ROOT

    modules = ("pytest_duplexact.bridges.modelkit", "pytest_duplexact.bridges.flm_audio",
               "pytest_duplexact.bridges.bayling_duplex", "pytest_duplexact.bridges.voila")
    res = subprocess.run([sys.executable, "-c", f"MODULES = {modules!r}\n" + PROBE],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", f"a model bridge pulls in {res.stdout.strip()}"
