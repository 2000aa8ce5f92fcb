"""``duplexact validate DIR`` and the checks behind it (instance.check_dataset): every problem
at once with file, instance and field, exit 1; a one-line summary and exit 0 when valid; the
plugin refuses the same dataset before any model is called; and no manifest, however broken,
makes the loader raise.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact import cli, instance, taxonomy
from pytest_duplexact.instance import bundled_root, check_dataset
from pytest_duplexact.rules import RULES

BUNDLED = bundled_root()
TEMPLATES = [json.loads(line) for line in
             (BUNDLED / instance.MANIFEST).read_text(encoding="utf-8").splitlines()]


def make_dataset(root: Path, lines: list) -> Path:
    """A dataset folder whose audio is the bundled set's (linked, not copied)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUNDLED / instance.HEADER, root / instance.HEADER)
    if not (root / "audio").exists():
        (root / "audio").symlink_to(BUNDLED / "audio", target_is_directory=True)
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    (root / instance.MANIFEST).write_text(text, encoding="utf-8")
    return root


def validate(capsys, *args: str) -> tuple[int, list[str]]:
    code = cli.main(["validate", *args])
    return code, capsys.readouterr().out.splitlines()


def test_the_bundled_set_is_valid_and_summarised_per_action(capsys):
    code, out = validate(capsys, str(BUNDLED))
    assert code == 0 and len(out) == 1
    per_action = Counter(t["action"] for t in TEMPLATES)
    expected = ", ".join(f"{a} {per_action[a]}" for a in taxonomy.ACTIONS)
    assert out[0].endswith(f"{len(TEMPLATES)} instances: {expected}"), out[0]
    assert "valid duplexact-dataset v1" in out[0]


def test_no_audio_checks_the_manifest_only(capsys, tmp_path):
    root = make_dataset(tmp_path / "data", TEMPLATES[:4])
    (root / "audio").unlink()  # the manifest names files that are not there
    code, out = validate(capsys, str(root), "--no-audio")
    assert code == 0 and out[0].endswith("(audio files not opened: --no-audio)")
    code, out = validate(capsys, str(root))
    assert code == 1 and sum("audio file not found" in ln for ln in out) >= 4


def first(action: str) -> dict:
    return copy.deepcopy(next(t for t in TEMPLATES if t["action"] == action))


def write_audio(path: Path, rate: int = 16000, channels: int = 1) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.zeros((rate, channels), np.float32), rate, subtype="PCM_16")
    return path.name


@pytest.fixture
def broken(tmp_path) -> tuple[Path, list[tuple[str, str, str]]]:
    """One defect of each class the format forbids; returns the folder and, per defect,
    (instance, field, message part)."""
    root = tmp_path / "data"
    (root / "bad").mkdir(parents=True)
    (root / "bad" / "garbage.flac").write_bytes(b"not audio at all" * 20)
    write_audio(root / "bad" / "8k.wav", rate=8000)
    write_audio(root / "bad" / "stereo.wav", channels=2)
    lines, expected = [], []

    def add(obj: dict, iid: str, field: str, text: str):
        obj["id"] = iid
        lines.append(obj)
        expected.append((iid, field, text))

    o = first("take_turn")
    o["audio"]["user"]["path"] = "bad/garbage.flac"
    add(o, "unreadable", "audio.user.path", "unreadable audio file bad/garbage.flac")
    o = first("take_turn")
    o["audio"]["reference"] = "bad/8k.wav"
    add(o, "rate", "audio.reference.path", "is 8000 Hz; the format requires 16000 Hz")
    o = first("wait")
    o["audio"]["reference"] = {"path": "bad/stereo.wav"}
    add(o, "stereo", "audio.reference.path", "has 2 channels; the format requires mono")
    o = first("take_turn")
    o["annotations"]["user_end"] = 99.0
    add(o, "window", "annotations.user_end", "99.000 s is outside the user audio")
    o = first("take_turn")
    o["condition"] = "eventually"
    add(o, "condition", "condition", "unknown condition 'eventually' for take_turn")
    o = first("stop")
    o["text"]["cue"] = " "
    add(o, "text", "text.cue", "required (non-empty) for stop")
    o = first("ignore")
    add(o, "a/b", "id", "cannot be used as a folder name")
    lines.append(dict(lines[0]))  # the unreadable one again: a duplicate id
    expected.append(("unreadable", "id", "duplicate id (first on line 1, again on line 8)"))
    o = first("wait")
    add(o, "Rate", "id", "differs only in letter case from the id on line 2")
    return make_dataset(root, lines), expected


def test_every_problem_at_once_with_file_instance_and_field(capsys, broken):
    root, expected = broken
    code, out = validate(capsys, str(root))
    assert code == 1
    manifest = str(root.resolve() / instance.MANIFEST)
    for iid, field, text in expected:
        hits = [ln for ln in out if ln.startswith(f"{manifest} [instance {iid}] field "
                                                  f"'{field}': ") and text in ln]
        assert hits, f"{iid} / {field} / {text} not in:\n" + "\n".join(out)
    _, problems = check_dataset(root)
    assert out[:-1] == [str(p) for p in problems]  # nothing else, in the loader's order
    assert out[-1].endswith(f"{len(problems)} problem(s) in {len(expected) - 1} instance(s) "
                            "or line(s); a run refuses this dataset (docs/dataset-format.md)")


def test_the_console_script_and_the_plugin_refuse_the_same_dataset(broken, tmp_path):
    """The installed ``duplexact`` script prints the same lines; ``pytest --duplexact-data``
    stops with them before the model is even imported (its module would leave a marker)."""
    root, expected = broken
    res = subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "validate", str(root)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    problems = res.stdout.splitlines()[:-1]
    assert len(problems) >= len(expected)

    home = tmp_path / "home"
    home.mkdir()
    marker = home / "model-was-imported"
    (home / "marker_model.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from pytest_duplexact.models.silent import SilentModel as factory\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(home), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-m", "pytest", "--duplexact-model=marker_model:factory",
                          f"--duplexact-data={root}", "-p", "no:cacheprovider"],
                         cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == pytest.ExitCode.USAGE_ERROR, res.stdout + res.stderr
    assert "refusing to start" in res.stderr
    for line in problems:
        assert line in res.stderr
    assert not marker.exists(), "the model was imported before the dataset was checked"
    assert not (home / "duplexact-runs").exists()


# ---- no manifest makes the loader raise; each defect is named ---------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6)
NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e400])
TEMPLATE_BY_ACTION = {t["action"]: t for t in TEMPLATES}  # one valid instance per action


def _required(obj: dict) -> dict[str, tuple[str, ...]]:
    """What the action's rule requires of an instance of this condition."""
    need = RULES[obj["action"]].requires(obj["condition"])
    return {"clips": need.clips, "ann": need.annotations, "text": need.texts}


@st.composite
def defect(draw, obj: dict) -> tuple[dict | str, str | None, str]:
    """A copy of the valid ``obj`` with one defect; returns (line, field the problem must
    name (None: the line as a whole), 'id' when the problem is reported under the line)."""
    obj = copy.deepcopy(obj)
    action = obj["action"]
    need = _required(obj)
    kind = draw(st.sampled_from([
        "drop_key", "drop_clip", "drop_annotation", "drop_text", "bad_id", "unsafe_id",
        "bad_enum", "section_type", "clip_type", "annotation_value", "window", "text_type",
        "unknown_name", "transcript", "not_an_object", "non_finite_raw"]))
    if kind == "drop_key":
        key = draw(st.sampled_from(["id", "action", "condition", "scenario", "source"]))
        del obj[key]
        return obj, key, "line" if key == "id" else "id"
    if kind == "drop_clip":
        role = draw(st.sampled_from(need["clips"]))
        del obj["audio"][role]
        return obj, f"audio.{role}", "id"
    if kind == "drop_annotation":
        name = draw(st.sampled_from(need["ann"]))
        del obj["annotations"][name]
        return obj, f"annotations.{name}", "id"
    if kind == "drop_text":
        name = draw(st.sampled_from(need["text"]))
        obj["text"][name] = draw(st.sampled_from(["", "  "]))
        return obj, f"text.{name}", "id"
    if kind == "bad_id":
        obj["id"] = draw(JSON.filter(lambda v: not (isinstance(v, str) and v.strip())))
        return obj, "id", "line"
    if kind == "unsafe_id":
        obj["id"] = draw(st.sampled_from(["a/b", "..", ".", "x\\y", "tab\there", "x" * 201]))
        return obj, "id", "id"
    if kind == "bad_enum":
        key = draw(st.sampled_from(["action", "condition", "scenario", "source"]))
        valid = {"action": taxonomy.ACTIONS, "scenario": taxonomy.SCENARIOS,
                 "source": taxonomy.SOURCES,
                 "condition": [c.id for c in taxonomy.conditions_of(action)]}[key]
        obj[key] = draw(JSON.filter(lambda v: v not in valid))
        return obj, key, "id"
    if kind == "section_type":
        key = draw(st.sampled_from(["audio", "annotations", "text"]))
        obj[key] = draw(JSON.filter(lambda v: v is not None and not isinstance(v, dict)))
        return obj, key, "id"
    if kind == "clip_type":
        role = draw(st.sampled_from(need["clips"]))
        obj["audio"][role] = draw(JSON.filter(lambda v: not isinstance(v, (str, dict))))
        return obj, f"audio.{role}", "id"
    if kind == "annotation_value":
        name = draw(st.sampled_from(need["ann"]))
        obj["annotations"][name] = draw(NON_FINITE | JSON.filter(
            lambda v: not isinstance(v, (int, float)) or isinstance(v, bool)))
        return obj, f"annotations.{name}", "id"
    if kind == "window":
        name = draw(st.sampled_from(need["ann"]))
        obj["annotations"][name] = draw(st.floats(-1e9, -1e-3) | st.floats(1e4, 1e9))
        return obj, f"annotations.{name}", "id"
    if kind == "text_type":
        name = draw(st.sampled_from(instance.TEXT_FIELDS))
        obj["text"][name] = draw(JSON.filter(lambda v: not isinstance(v, str)))
        return obj, f"text.{name}", "id"
    if kind == "unknown_name":
        section = draw(st.sampled_from(["audio", "annotations", "text"]))
        known = {"audio": instance.CLIP_ROLES, "annotations": instance.ANNOTATION_FIELDS,
                 "text": instance.TEXT_FIELDS}[section]
        name = draw(st.text(min_size=1, max_size=8).filter(lambda n: n not in known))
        obj[section][name] = "x"
        return obj, f"{section}.{name}", "id"
    if kind == "transcript":
        role = draw(st.sampled_from(need["clips"]))
        clip = obj["audio"][role]
        clip = {"path": clip} if isinstance(clip, str) else clip
        clip["transcript"] = draw(
            JSON.filter(lambda v: v is not None and not isinstance(v, list))
            | st.lists(JSON.filter(lambda v: not isinstance(v, dict)), min_size=1, max_size=2)
            | st.just([{"start": 1.0, "end": 0.5, "text": "backwards"}])
            | st.just([{"start": 0.0, "end": float("nan"), "text": "nan"}]))
        obj["audio"][role] = clip
        return obj, f"audio.{role}.transcript", "id"
    if kind == "not_an_object":
        return json.dumps(draw(JSON.filter(lambda v: not isinstance(v, dict)))), None, "line"
    # non_finite_raw: numbers JSON cannot give Python as a float (a 5000-digit integer)
    name = draw(st.sampled_from(need["ann"]))
    text = json.dumps(obj).replace(f'"{name}": ', f'"{name}": {"9" * 5000}, "_": ', 1)
    return text, None, "line"


@st.composite
def manifests(draw):
    """Valid lines (renamed, so ids are unique) with some defective ones among them."""
    actions = draw(st.lists(st.sampled_from(sorted(TEMPLATE_BY_ACTION)), min_size=1,
                            max_size=6))
    lines, defects = [], []
    for k, action in enumerate(actions):
        obj = copy.deepcopy(TEMPLATE_BY_ACTION[action])
        obj["id"] = f"case-{k}"
        if draw(st.booleans()):
            line, field, where = draw(defect(obj))
            defects.append((len(lines) + 1, obj["id"] if where == "id" else None, field,
                            line))
            lines.append(line)
        else:
            lines.append(draw(benign(obj)))
    return lines, defects


@st.composite
def benign(draw, obj: dict) -> dict:
    """Changes the format allows: extra keys (kept as ``extra``), a clip given as a bare path
    (no transcript), optional texts left out."""
    if draw(st.booleans()):
        obj[draw(st.sampled_from(["note", "synthesis", "origin"]))] = draw(JSON)
    if draw(st.booleans()):
        role = draw(st.sampled_from(sorted(obj["audio"])))
        clip = obj["audio"][role]
        obj["audio"][role] = clip["path"] if isinstance(clip, dict) else clip
    optional = [k for k in obj["text"] if k not in _required(obj)["text"]]
    if optional and draw(st.booleans()):
        del obj["text"][draw(st.sampled_from(optional))]
    return obj


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("fuzz") / "data", [])


def _iid(line, fallback: str | None) -> str | None:
    """The id a defective line's problems are filed under."""
    if isinstance(line, dict):
        iid = line.get("id")
        if isinstance(iid, str) and iid.strip():
            return iid
    return fallback


@settings(max_examples=80)
@given(manifests())
def test_defects_are_named_and_valid_lines_load(scratch, case):
    lines, defects = case
    make_dataset(scratch, lines)
    dataset, problems = check_dataset(scratch)
    if not defects:
        assert problems == [] and [i.id for i in dataset.instances] == \
            [ln["id"] for ln in lines]
        return
    assert dataset is None
    for line_no, iid, field, line in defects:
        owner = _iid(line, iid) if iid is not None else None
        label = owner if owner is not None else f"line {line_no}"
        mine = [p for p in problems if p.instance == label]
        assert mine, f"nothing reported for {label}: {problems}"
        if field is not None:
            assert any(p.field is not None and p.field.startswith(field) for p in mine), \
                f"{field} not named for {label}: {mine}"
    flagged = {p.instance for p in problems}
    for k, ln in enumerate(lines, 1):
        if isinstance(ln, dict) and all(k != d[0] for d in defects):
            assert ln["id"] not in flagged, f"valid line {k} was reported: {problems}"


@settings(max_examples=60)
@given(st.lists(JSON.map(json.dumps) | st.text(max_size=40), max_size=5),
       st.one_of(st.none(), JSON.map(json.dumps), st.binary(max_size=20)))
def test_no_input_makes_the_loader_raise(scratch, lines, header):
    make_dataset(scratch, lines)
    if header is not None:
        path = scratch / instance.HEADER
        path.write_bytes(header if isinstance(header, bytes) else header.encode())
    dataset, problems = check_dataset(scratch)
    assert (dataset is None) == bool(problems)
    for p in problems:
        assert p.file and p.message and str(p)


def test_undecodable_and_deeply_nested_manifests_are_problems_not_crashes(tmp_path):
    root = make_dataset(tmp_path / "data", [])
    (root / instance.MANIFEST).write_text("[" * 100_000 + "\n", encoding="utf-8")
    _, problems = check_dataset(root)
    assert [p.instance for p in problems] == ["line 1"]
    assert "not valid JSON" in problems[0].message
    (root / instance.MANIFEST).write_bytes(b'{"id": "\xff\xfe"}\n')
    _, problems = check_dataset(root)
    assert len(problems) == 1 and "cannot be read" in problems[0].message
