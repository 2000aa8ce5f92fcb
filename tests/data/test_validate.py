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

from pytest_duplexact import cli
from pytest_duplexact.data import instance, taxonomy
from pytest_duplexact.data.instance import bundled_root, check_dataset
from pytest_duplexact.rules import RULES, requires
from tests.support.runs import link_audio

BUNDLED = bundled_root()
TEMPLATES = [json.loads(line) for line in
             (BUNDLED / instance.MANIFEST).read_text(encoding="utf-8").splitlines()]


def make_dataset(root: Path, lines: list) -> Path:
    """A dataset folder whose audio is the bundled set's (hard-linked, not copied)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUNDLED / instance.HEADER, root / instance.HEADER)
    if not (root / "audio").exists():
        link_audio(BUNDLED / "audio", root / "audio")
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
    shutil.rmtree(root / "audio")  # the manifest names files that are not there
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
    _, problems = check_dataset(root, requires=requires)
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
        "from pytest_duplexact.models.providers.silent import SilentModel as factory\n")
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


@pytest.mark.parametrize("manifest", ["", "\n  \n\r\n"], ids=["empty", "blank-lines"])
def test_a_dataset_with_no_instances_is_a_problem_naming_its_manifest(capsys, tmp_path,
                                                                      manifest):
    """Before: "valid ..., 0 instances" and exit 0 (and a run made a folder of empty tables)."""
    root = make_dataset(tmp_path / "data", [])
    (root / instance.MANIFEST).write_text(manifest, encoding="utf-8")
    code, out = validate(capsys, str(root))
    assert code == 1
    assert out[0].startswith(f"{root.resolve() / instance.MANIFEST}: no instances"), out
    assert len(out) == 2 and "a run refuses this dataset" in out[1], out


def test_no_instances_is_said_only_when_no_line_was_refused(tmp_path):
    root = make_dataset(tmp_path / "data", ["{not json"])
    _, problems = check_dataset(root, requires=requires)
    assert [p.instance for p in problems] == ["line 1"]  # that line, not "no instances" too


def test_the_plugin_refuses_a_dataset_with_no_instances_before_making_a_run_folder(tmp_path):
    root = make_dataset(tmp_path / "data", [])
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    res = subprocess.run([sys.executable, "-m", "pytest", "--duplexact-model=oracle",
                          f"--duplexact-data={root}", "-p", "no:cacheprovider"],
                         cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == pytest.ExitCode.USAGE_ERROR, res.stdout + res.stderr
    assert "refusing to start" in res.stderr
    assert f"{root.resolve() / instance.MANIFEST}: no instances" in res.stderr
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
    dataset, problems = check_dataset(scratch, requires=requires)
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
    dataset, problems = check_dataset(scratch, requires=requires)
    assert (dataset is None) == bool(problems)
    for p in problems:
        assert p.file and p.message and str(p)


def test_undecodable_and_deeply_nested_manifests_are_problems_not_crashes(tmp_path):
    root = make_dataset(tmp_path / "data", [])
    (root / instance.MANIFEST).write_text("[" * 100_000 + "\n", encoding="utf-8")
    _, problems = check_dataset(root, requires=requires)
    assert [p.instance for p in problems] == ["line 1"]
    assert "not valid JSON" in problems[0].message
    (root / instance.MANIFEST).write_bytes(b'{"id": "\xff\xfe"}\n')
    _, problems = check_dataset(root, requires=requires)
    assert len(problems) == 1 and "cannot be read" in problems[0].message


# --- hostile datasets (issue 12) ----------------------------------------------------------

def problems_of(root: Path, **kw) -> list[str]:
    _, problems = check_dataset(root, **kw, requires=requires)
    return [str(p) for p in problems]


def test_a_raw_line_separator_inside_a_string_is_valid_jsonl(tmp_path):
    """json.dumps(ensure_ascii=False) writes U+2028 / U+0085 raw; only "\\n" ends a line."""
    o = first("take_turn")
    o["text"]["reference"] = "one\u2028two\u0085three\u2029four"
    lines = [json.dumps(o, ensure_ascii=False), json.dumps(first("wait"), ensure_ascii=False)]
    root = make_dataset(tmp_path / "data", lines)
    dataset, problems = check_dataset(root, requires=requires)
    assert problems == []
    assert dataset.instances[0].texts["reference"] == "one\u2028two\u0085three\u2029four"
    # line numbers stay those of "\n" lines: a broken third line is reported as line 3
    (root / instance.MANIFEST).write_text("\r\n".join(lines + ["{oops"]) + "\r\n",
                                          encoding="utf-8")
    assert any("[instance line 3]" in p and "not valid JSON" in p for p in problems_of(root))


@pytest.mark.parametrize("path,why", [
    ("/etc/passwd", "must be relative to the dataset folder"),
    ("../outside.flac", "must stay inside the dataset folder"),
    ("audio/../../x.flac", "must stay inside the dataset folder"),
    ("C:\\\\data\\\\x.flac", "must be relative to the dataset folder"),
])
def test_clip_paths_outside_the_dataset_are_refused(tmp_path, path, why):
    o = first("take_turn")
    o["audio"]["user"]["path"] = path
    root = make_dataset(tmp_path / "data", [o])
    assert any("audio.user.path" in p and why in p for p in problems_of(root)), \
        problems_of(root)


def test_a_symlink_out_of_the_dataset_is_refused(tmp_path):
    o = first("take_turn")
    outside = tmp_path / "elsewhere.flac"
    shutil.copy(BUNDLED / o["audio"]["user"]["path"], outside)
    o["audio"]["user"]["path"] = "audio/sneaky.flac"
    root = make_dataset(tmp_path / "data", [o])
    (root / "audio" / "sneaky.flac").symlink_to(outside)
    assert any("resolves outside the dataset folder" in p for p in problems_of(root))


def test_empty_and_overlong_clips_are_refused(tmp_path):
    o, p = first("take_turn"), first("take_turn")
    p["id"] = "long"
    root = make_dataset(tmp_path / "data", [o, p])
    o["audio"]["user"]["path"] = write_audio_n(root / "bad" / "empty.wav", 0)
    long = root / "bad" / "long.flac"
    with sf.SoundFile(str(long), "w", 16000, 1, subtype="PCM_16") as f:  # 10 min 1 s
        block = np.zeros(16000 * 60, np.float32)
        for _ in range(10):
            f.write(block)
        f.write(block[:16000])
    p["audio"]["user"]["path"] = "bad/long.flac"
    make_dataset(root, [o, p])
    found = problems_of(root)
    assert any("bad/empty.wav has no samples" in x for x in found)
    assert any("bad/long.flac lasts 601 s, over the 600 s limit" in x for x in found)


def write_audio_n(path: Path, n: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.zeros(n, np.float32), 16000, subtype="PCM_16")
    return str(path.relative_to(path.parent.parent))


def test_negative_word_times_are_refused(tmp_path):
    o = first("take_turn")
    o["audio"]["user"]["transcript"][0]["start"] = -0.25
    root = make_dataset(tmp_path / "data", [o])
    assert any("audio.user.transcript[0]" in p and "starts at -0.25 s" in p
               for p in problems_of(root))


def test_validate_decodes_so_a_corrupt_flac_body_is_caught_naming_the_file(capsys, tmp_path):
    o = first("take_turn")
    root = make_dataset(tmp_path / "data", [o])
    bad = root / "bad" / "corrupt.flac"
    bad.parent.mkdir()
    data = bytearray((BUNDLED / o["audio"]["user"]["path"]).read_bytes())
    for i in range(len(data) // 3, len(data) - 64):  # keep the header, wreck the frames
        data[i] = (data[i] * 7 + 13) & 0xFF
    bad.write_bytes(bytes(data))
    o["audio"]["user"]["path"] = "bad/corrupt.flac"
    make_dataset(root, [o])
    code, _ = validate(capsys, str(root), "--headers-only")
    assert code == 0  # the header is intact: a header check cannot see it
    code, out = validate(capsys, str(root))
    assert code == 1
    assert any("audio.user.path" in ln and "bad/corrupt.flac" in ln for ln in out), out
    from pytest_duplexact.data import audio

    with pytest.raises(audio.AudioFormatError, match="corrupt.flac: cannot be decoded"):
        audio.read(bad)


def test_the_fingerprint_covers_the_audio_not_the_folder(tmp_path):
    """Resume must not reuse outcomes scored on other audio; shards on other machines (other
    paths) must still agree."""
    from pytest_duplexact.data.instance import load_dataset
    from pytest_duplexact.pytest_plugin.configure import dataset_fingerprint

    a = make_dataset(tmp_path / "a", TEMPLATES[:3])
    b = make_dataset(tmp_path / "elsewhere" / "b", TEMPLATES[:3])

    def fingerprint(root):
        return dataset_fingerprint(load_dataset(root, requires=requires))

    assert fingerprint(a) == fingerprint(b)
    clip = b / TEMPLATES[0]["audio"]["user"]["path"]
    data = clip.read_bytes()
    clip.unlink()  # a hard link: replace the file, never edit the bundled one through it
    clip.write_bytes(data[:-2] + bytes([data[-2] ^ 1, data[-1]]))
    assert fingerprint(a) != fingerprint(b)
