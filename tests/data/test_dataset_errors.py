"""A broken dataset fails at load time with every problem named by file, instance and field.

Each test copies the bundled set, breaks one thing on purpose and reads the DatasetError.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data import instance
from pytest_duplexact.data.instance import DatasetError, bundled_root, load_dataset
from pytest_duplexact.rules import requires


@pytest.fixture
def root(tmp_path) -> Path:
    dst = tmp_path / "data"
    src = bundled_root()
    shutil.copytree(src / "audio", dst / "audio")
    for name in (instance.HEADER, instance.MANIFEST):
        shutil.copy(src / name, dst / name)
    return dst.resolve()


def lines(root: Path) -> list[dict]:
    return [json.loads(s) for s in (root / instance.MANIFEST).read_text().splitlines()]


def save(root: Path, objs: list) -> None:
    text = "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)
    (root / instance.MANIFEST).write_text(text)


def first(objs: list[dict], action: str, condition: str | None = None) -> dict:
    return next(o for o in objs
                if o["action"] == action and condition in (None, o["condition"]))


def failure(root: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_dataset(root, requires=requires)
    return info.value


def assert_named(err: DatasetError, file: Path, instance_id: str | None, field: str | None,
                 text: str) -> None:
    """One problem names this file, instance and field; the message says so too."""
    hits = [p for p in err.problems if p.file == str(file) and p.instance == instance_id
            and p.field == field and text in p.message]
    assert hits, "\n".join(map(str, err.problems))
    line = str(hits[0])
    assert str(file) in line and text in line
    assert line in str(err)
    if instance_id:
        assert f"[instance {instance_id}]" in line
    if field:
        assert f"field '{field}'" in line


def test_the_copy_loads(root):
    assert len(load_dataset(root, requires=requires).instances) == len(lines(root))


def test_missing_audio_file(root):
    objs = lines(root)
    o = first(objs, "take_turn")
    (root / o["audio"]["user"]["path"]).unlink()
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "audio.user.path",
                 "audio file not found")


def test_window_outside_its_audio(root):
    objs = lines(root)
    o = first(objs, "ignore")
    o["annotations"]["other_end"] = 99.0
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "annotations.other_end",
                 "outside the user audio")


def test_cue_window_outside_the_cue_clip(root):
    objs = lines(root)
    o = first(objs, "hold_floor")
    o["annotations"]["cue_end"] = 42.0
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "annotations.cue_end",
                 "outside the cue audio")


def test_window_order_reversed(root):
    objs = lines(root)
    o = first(objs, "wait", "inter_sentential_pause")
    ann = o["annotations"]
    ann["pause_start"], ann["pause_end"] = ann["pause_end"], ann["pause_start"]
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "annotations.pause_end",
                 "is before pause_start")


def test_unknown_condition(root):
    objs = lines(root)
    o = first(objs, "take_turn")
    o["condition"] = "eventually"
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "condition",
                 "unknown condition 'eventually' for take_turn")


def test_unknown_action(root):
    objs = lines(root)
    o = first(objs, "stop")
    o["action"] = "shout"
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "action",
                 "unknown action 'shout'")


def test_unknown_scenario(root):
    objs = lines(root)
    o = first(objs, "backchannel")
    o["scenario"] = "podcast"
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "scenario",
                 "unknown scenario 'podcast'")


def test_wrong_sample_rate(root):
    o = first(lines(root), "interrupt")
    path = root / o["audio"]["user"]["path"]
    sf.write(str(path), np.zeros(8000, np.float32), 8000, format="FLAC", subtype="PCM_16")
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "audio.user.path",
                 "is 8000 Hz; the format requires 16000 Hz")


def test_stereo_file(root):
    o = first(lines(root), "recover")
    path = root / o["audio"]["recovery"]["path"]
    sf.write(str(path), np.zeros((16000, 2), np.float32), 16000, format="FLAC",
             subtype="PCM_16")
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "audio.recovery.path",
                 "has 2 channels; the format requires mono")


def test_duplicate_id(root):
    objs = lines(root)
    save(root, objs + [objs[3]])
    assert_named(failure(root), root / instance.MANIFEST, objs[3]["id"], "id",
                 f"duplicate id (first on line 4, again on line {len(objs) + 1})")


def test_invalid_json_line(root):
    objs = lines(root)
    save(root, objs[:5] + ['{"id": "half-a-line", "action": '] + objs[5:])
    # Nothing of the line can be trusted, not even its id: the line number stands in.
    assert_named(failure(root), root / instance.MANIFEST, "line 6", None, "not valid JSON")


def test_missing_required_text(root):
    objs = lines(root)
    o = first(objs, "take_turn")
    del o["text"]["user"]
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"], "text.user",
                 "required (non-empty) for take_turn")


def test_missing_required_annotation(root):
    objs = lines(root)
    o = first(objs, "interrupt")
    del o["annotations"]["interrupt_target"]
    save(root, objs)
    assert_named(failure(root), root / instance.MANIFEST, o["id"],
                 "annotations.interrupt_target", "required for interrupt.")


def test_missing_header(root):
    (root / instance.HEADER).unlink()
    assert_named(failure(root), root / instance.HEADER, None, None, "missing dataset.json")


def test_wrong_version(root):
    header = json.loads((root / instance.HEADER).read_text())
    header["version"] = 99
    (root / instance.HEADER).write_text(json.dumps(header))
    assert_named(failure(root), root / instance.HEADER, None, "version",
                 "unsupported version 99")


def test_every_problem_is_reported_at_once(root):
    objs = lines(root)
    a, b, c = first(objs, "wait"), first(objs, "ignore"), first(objs, "backchannel")
    (root / a["audio"]["reference"]["path"]).unlink()
    b["scenario"] = "podcast"
    c["annotations"]["backchannel_point"] = -1.0
    save(root, objs + [objs[0]])
    header = json.loads((root / instance.HEADER).read_text())
    header["version"] = 2
    (root / instance.HEADER).write_text(json.dumps(header))

    err = failure(root)
    manifest = root / instance.MANIFEST
    assert_named(err, manifest, a["id"], "audio.reference.path", "audio file not found")
    assert_named(err, manifest, b["id"], "scenario", "unknown scenario")
    assert_named(err, manifest, c["id"], "annotations.backchannel_point", "outside the user")
    assert_named(err, manifest, objs[0]["id"], "id", "duplicate id")
    assert_named(err, root / instance.HEADER, None, "version", "unsupported version 2")
    assert str(err).startswith(f"{len(err.problems)} problem(s) in the dataset:")


def test_one_instance_with_several_problems_reports_them_all(root):
    objs = lines(root)
    o = first(objs, "ignore")
    o["scenario"] = "podcast"
    o["annotations"]["other_end"] = 99.0
    del o["annotations"]["other_start"]  # and the containment check must not trip on it
    save(root, objs)
    err = failure(root)
    manifest = root / instance.MANIFEST
    assert_named(err, manifest, o["id"], "scenario", "unknown scenario 'podcast'")
    assert_named(err, manifest, o["id"], "annotations.other_end", "outside the user audio")
    assert_named(err, manifest, o["id"], "annotations.other_start", "required for ignore.")
