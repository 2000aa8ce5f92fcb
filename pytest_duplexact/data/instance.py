"""Benchmark instances and the on-disk dataset format (docs/dataset-format.md).

A dataset is a folder with ``dataset.json`` (format name and version) and ``instances.jsonl``
(one instance a line) plus the audio files those lines name. Loading checks everything a run
relies on and reports *every* problem at once, each naming the file, the instance and the
field, so a broken dataset fails before any model is called.

What each condition must carry is its rule's (rules/<action>.py, a floor above): the caller
gives it as ``requires`` (``rules.requires``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Callable

from . import audio, taxonomy
from .annotations import Annotations, Clip, Instance, Requirements
from .timeline import Word

__all__ = ["ANNOTATION_FIELDS", "Annotations", "CLIP_ROLES", "Clip", "Dataset", "DatasetError",
           "FORMAT_NAME", "FORMAT_VERSION", "HEADER", "Instance", "MANIFEST", "Problem",
           "Requires", "TEXT_FIELDS", "bundled_root", "check_dataset", "id_problem",
           "instance_problems", "load_dataset", "parse_instance", "read_header", "show_value"]

FORMAT_NAME = "duplexact-dataset"
FORMAT_VERSION = 1
MANIFEST = "instances.jsonl"
HEADER = "dataset.json"

CLIP_ROLES = ("user", "lead_in", "cue", "reference", "backchannel", "recovery",
              "branch_acknowledged", "branch_ignored")
# Model-side clips: optional references for judges and the built-in oracle, never streamed.
MODEL_CLIP_ROLES = ("reference", "backchannel", "recovery")
TEXT_FIELDS = ("user", "ignored", "cue", "reference", "backchannel", "recovery")
ANNOTATION_FIELDS = (
    "user_start", "user_end", "pause_start", "pause_end", "other_start", "other_end",
    "interrupt_target", "backchannel_point", "cue_start", "cue_end",
)

# (action, condition) -> what an instance of it must carry: rules.requires.
Requires = Callable[[str, str], Requirements]


@dataclass(frozen=True)
class Problem:
    file: str
    instance: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.instance:
            where += f" [instance {self.instance}]"
        if self.field:
            where += f" field '{self.field}'"
        return f"{where}: {self.message}"


class DatasetError(Exception):
    """The dataset cannot be used; ``problems`` lists every defect found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        head = f"{len(problems)} problem(s) in the dataset:"
        super().__init__("\n".join([head] + [f"  - {p}" for p in problems]))


@dataclass(frozen=True)
class Dataset:
    root: Path
    name: str
    instances: tuple[Instance, ...]

    def by_condition(self, action: str, condition: str) -> list[Instance]:
        return [i for i in self.instances if i.action == action and i.condition == condition]


class _Checker:
    def __init__(self, file: Path):
        self.file = str(file)
        self.problems: list[Problem] = []

    def add(self, instance, field_, message):
        self.problems.append(Problem(self.file, instance, field_, message))


def _number(v) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer too large for a float
        return False


def _show(v, limit: int = 60) -> str:
    """repr for a message, cut short (a manifest value may be any JSON, of any size)."""
    try:
        text = repr(v)
    except ValueError:  # an integer with more digits than Python will print
        return "<a number too large to print>"
    except RecursionError:  # a list nested thousands deep
        return f"<a {type(v).__name__} nested too deeply to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


show_value = _show  # the same short, safe repr for other modules' messages


# Each instance is stored in <run dir>/instances/<id>/, so an id must be one folder name.
_ID_MAX_BYTES = 200


def id_problem(iid: str) -> str | None:
    """Why ``iid`` cannot name an instance folder, or None."""
    if iid in (".", "..") or any(c in iid for c in "/\\") or \
            any(ord(c) < 32 or ord(c) == 127 for c in iid):
        return ("cannot be used as a folder name (no '/', '\\', control characters, not '.' "
                "or '..'): each instance's recordings are stored under instances/<id>/")
    if len(iid.encode("utf-8", "surrogatepass")) > _ID_MAX_BYTES:
        return f"longer than {_ID_MAX_BYTES} bytes (it names the instance's folder)"
    return None


def _parse_words(raw, chk: _Checker, iid: str, fld: str) -> tuple[Word, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        chk.add(iid, fld, "must be a list of {start, end, text} objects")
        return ()
    words = []
    for k, w in enumerate(raw):
        f = f"{fld}[{k}]"
        if not isinstance(w, dict) or not _number(w.get("start")) or not _number(w.get("end")) \
                or not isinstance(w.get("text"), str):
            chk.add(iid, f, "must be an object with numeric start, end and string text")
            continue
        if w["end"] < w["start"]:
            chk.add(iid, f, f"ends ({w['end']}) before it starts ({w['start']})")
            continue
        if w["start"] < 0:
            chk.add(iid, f, f"starts at {w['start']} s, before the clip does (times are "
                    "seconds from the clip's first sample)")
            continue
        words.append(Word(float(w["start"]), float(w["end"]), w["text"]))
    return tuple(words)


MAX_CLIP_S = 600.0  # ten minutes: longer clips are data errors here (memory, run folder size)


def _inside(root: Path, rel: str) -> str | None:
    """Why clip path ``rel`` may not be read from dataset folder ``root``, or None."""
    if Path(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or rel.startswith("~"):
        return "must be relative to the dataset folder"
    if ".." in Path(rel).parts or ".." in PureWindowsPath(rel).parts:
        return "must stay inside the dataset folder (no '..')"
    return None


def _parse_clip(raw, root: Path, chk: _Checker, iid: str, role: str, check_audio: bool,
                decode: bool = False):
    fld = f"audio.{role}"
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
        chk.add(iid, fld, "must be a path string or an object with a 'path'")
        return None
    why = _inside(root, raw["path"])
    if why is not None:
        chk.add(iid, f"{fld}.path", f"{_show(raw['path'])} {why}")
        return None
    try:
        path = (root / raw["path"]).resolve()
        exists = path.is_file()
    except (OSError, ValueError) as e:  # NUL bytes, names too long for the file system
        chk.add(iid, f"{fld}.path", f"not a usable path {_show(raw['path'])}: {e}")
        return None
    if not path.is_relative_to(root):
        chk.add(iid, f"{fld}.path", f"{_show(raw['path'])} resolves outside the dataset folder "
                f"(to {path}; a symlink?): clips must live inside it")
        return None
    duration = math.nan
    if check_audio:
        if not exists:
            chk.add(iid, f"{fld}.path", f"audio file not found: {raw['path']}")
            return None
        try:
            sr, ch, frames = audio.info(path)
        except Exception as e:  # unreadable or not audio
            chk.add(iid, f"{fld}.path", f"unreadable audio file {raw['path']}: {e}")
            return None
        if sr != audio.SAMPLE_RATE:
            chk.add(iid, f"{fld}.path",
                    f"{raw['path']} is {sr} Hz; the format requires {audio.SAMPLE_RATE} Hz")
        if ch != 1:
            chk.add(iid, f"{fld}.path", f"{raw['path']} has {ch} channels; the format requires mono")
        duration = frames / sr if sr else 0.0
        if frames <= 0:
            chk.add(iid, f"{fld}.path", f"{raw['path']} has no samples")
        elif duration > MAX_CLIP_S:
            chk.add(iid, f"{fld}.path", f"{raw['path']} lasts {duration:.0f} s, over the "
                    f"{MAX_CLIP_S:.0f} s limit for one clip (docs/dataset-format.md)")
        elif decode and sr == audio.SAMPLE_RATE and ch == 1:
            try:  # the header can be fine and the body corrupt (a FLAC that lost sync)
                n = len(audio.read(path))
            except Exception as e:
                chk.add(iid, f"{fld}.path", f"{raw['path']} does not decode: {e}")
                return None
            if n != frames:
                chk.add(iid, f"{fld}.path", f"{raw['path']} decodes to {n} samples; its "
                        f"header says {frames}")
    words = _parse_words(raw.get("transcript"), chk, iid, f"{fld}.transcript")
    for k, w in enumerate(words):
        if not math.isnan(duration) and w.end > duration + 1e-3:
            chk.add(iid, f"{fld}.transcript[{k}]",
                    f"ends at {w.end:.3f} s, after the clip ends ({duration:.3f} s)")
    return Clip(path, duration, words)


def parse_instance(obj, root: Path, chk: _Checker, line_no: int, check_audio: bool = True,
                   decode: bool = False, *, requires: Requires):
    """One manifest line -> Instance, or None with problems recorded on ``chk``."""
    if not isinstance(obj, dict):
        chk.add(f"line {line_no}", None, "each line must be a JSON object")
        return None
    iid = obj.get("id")
    if not isinstance(iid, str) or not iid.strip():
        chk.add(f"line {line_no}", "id", "missing or empty instance id")
        return None
    ok = True
    bad_id = id_problem(iid)
    if bad_id:
        chk.add(iid, "id", bad_id)
        ok = False
    action, cond = obj.get("action"), obj.get("condition")
    if action not in taxonomy.ACTIONS:
        chk.add(iid, "action",
                f"unknown action {_show(action)}; known: {', '.join(taxonomy.ACTIONS)}")
        return None
    if f"{action}.{cond}" not in taxonomy.CONDITIONS_BY_KEY:
        known = ", ".join(c.id for c in taxonomy.conditions_of(action))
        chk.add(iid, "condition", f"unknown condition {_show(cond)} for {action}; known: {known}")
        return None
    scenario = obj.get("scenario")
    if scenario not in taxonomy.SCENARIOS:
        chk.add(iid, "scenario", f"unknown scenario {_show(scenario)}; known: "
                f"{', '.join(taxonomy.SCENARIOS)}")
        ok = False
    source = obj.get("source")
    if source not in taxonomy.SOURCES:
        chk.add(iid, "source",
                f"unknown source {_show(source)}; known: {', '.join(taxonomy.SOURCES)}")
        ok = False
    corpus = obj.get("corpus")
    if corpus is not None and corpus not in taxonomy.CORPORA:
        chk.add(iid, "corpus",
                f"unknown corpus {_show(corpus)}; known: {', '.join(taxonomy.CORPORA)}")
        ok = False

    need = requires(action, cond)
    raw_audio = {} if obj.get("audio") is None else obj["audio"]
    if not isinstance(raw_audio, dict):
        chk.add(iid, "audio", "must be an object mapping clip roles to files")
        return None
    clips: dict[str, Clip] = {}
    for role, raw in raw_audio.items():
        if role not in CLIP_ROLES:
            chk.add(iid, f"audio.{role}", f"unknown clip role; known: {', '.join(CLIP_ROLES)}")
            ok = False
            continue
        clip = _parse_clip(raw, root, chk, iid, role, check_audio, decode)
        if clip is None:
            ok = False
        else:
            clips[role] = clip
    for role in need.clips:
        if role not in raw_audio:
            chk.add(iid, f"audio.{role}", f"required for {action}")
            ok = False

    raw_ann = {} if obj.get("annotations") is None else obj["annotations"]
    if not isinstance(raw_ann, dict):
        chk.add(iid, "annotations", "must be an object")
        return None
    ann_values: dict[str, float] = {}
    for k, v in raw_ann.items():
        if k not in ANNOTATION_FIELDS:
            chk.add(iid, f"annotations.{k}", "unknown annotation")
            ok = False
        elif not _number(v):
            chk.add(iid, f"annotations.{k}",
                    f"must be a finite number of seconds, got {_show(v)}")
            ok = False
        else:
            ann_values[k] = float(v)
    for k in need.annotations:
        if k not in raw_ann:
            chk.add(iid, f"annotations.{k}", f"required for {action}.{cond}")
            ok = False
    ann = Annotations(**ann_values)

    raw_text = {} if obj.get("text") is None else obj["text"]
    if not isinstance(raw_text, dict):
        chk.add(iid, "text", "must be an object")
        return None
    texts = {}
    for k, v in raw_text.items():
        if k not in TEXT_FIELDS:
            chk.add(iid, f"text.{k}", f"unknown text field; known: {', '.join(TEXT_FIELDS)}")
            ok = False
        elif not isinstance(v, str):
            chk.add(iid, f"text.{k}", "must be a string")
            ok = False
        else:
            texts[k] = v
    for k in need.texts:
        if not texts.get(k, "").strip():
            chk.add(iid, f"text.{k}", f"required (non-empty) for {action}")
            ok = False

    # Windows are checked even when other fields failed, so every problem shows at once.
    ok = _check_windows(ann, clips, chk, iid, need.within_user) and ok
    if not ok:
        return None
    extra = {k: v for k, v in obj.items()
             if k not in ("id", "action", "condition", "scenario", "source", "audio",
                          "annotations", "text", "corpus")}
    return Instance(iid, action, cond, scenario, source, ann, clips, texts, chk.file, line_no,
                    extra, corpus)


def _check_windows(ann: Annotations, clips, chk: _Checker, iid, within_user) -> bool:
    """Every window inside its audio and in order. Returns False on any problem."""
    start = len(chk.problems)

    def order(a: str, b: str):
        va, vb = getattr(ann, a), getattr(ann, b)
        if va is not None and vb is not None and vb < va:
            chk.add(iid, f"annotations.{b}", f"{b} ({vb}) is before {a} ({va})")

    def inside(name: str, role: str):
        v, clip = getattr(ann, name), clips.get(role)
        if v is None or clip is None or math.isnan(clip.duration):
            return
        if v < 0 or v > clip.duration + 1e-3:
            shown = f"{v:.3f}" if abs(v) < 1e9 else f"{v:.4g}"  # 1e300: not 300 digits
            chk.add(iid, f"annotations.{name}",
                    f"{shown} s is outside the {role} audio (0 to {clip.duration:.3f} s)")

    order("user_start", "user_end")
    order("pause_start", "pause_end")
    order("other_start", "other_end")
    order("cue_start", "cue_end")
    for name in ("user_start", "user_end", "pause_start", "pause_end", "other_start",
                 "other_end", "interrupt_target", "backchannel_point"):
        inside(name, "user")
    inside("cue_start", "cue")
    inside("cue_end", "cue")

    def check_within_user(first: str, last: str, message: str):
        """[first, last] inside [user_start, user_end]; silent when any of them is missing
        (a missing required annotation is reported on its own)."""
        vals = (ann.user_start, getattr(ann, first), getattr(ann, last), ann.user_end)
        if None not in vals and not (vals[0] <= vals[1] and vals[2] <= vals[3]):
            chk.add(iid, f"annotations.{first}", message)

    for first, last, message in within_user:  # the action's own (rules/<action>.py)
        check_within_user(first, last, message)
    return len(chk.problems) == start


def read_header(root: Path, chk: _Checker) -> dict:
    hp = root / HEADER
    if not hp.is_file():
        chk.problems.append(Problem(str(hp), None, None, f"missing {HEADER}"))
        return {}
    try:
        header = json.loads(hp.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON
        chk.problems.append(Problem(str(hp), None, None, f"not valid JSON: {e}"))
        return {}
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        chk.problems.append(Problem(str(hp), None, "format", f"must be {FORMAT_NAME!r}"))
        return {}
    if header.get("version") != FORMAT_VERSION:
        chk.problems.append(Problem(str(hp), None, "version",
                                    f"unsupported version {_show(header.get('version'))}; "
                                    f"this release reads version {FORMAT_VERSION}"))
    if not isinstance(header.get("name", ""), str):
        chk.problems.append(Problem(str(hp), None, "name", "must be a string"))
    return header


def instance_problems(obj, root: Path | str, line_no: int = 1, *,
                      requires: Requires) -> list[Problem]:
    """What the loader would refuse in one manifest line of the dataset at ``root`` (its audio
    files read); the released-data converter checks each row with it as it writes the row."""
    root = Path(root).resolve()
    chk = _Checker(root / MANIFEST)
    parse_instance(obj, root, chk, line_no, requires=requires)
    return chk.problems


def check_dataset(root: Path | str, check_audio: bool = True, decode: bool = False, *,
                  requires: Requires) -> tuple[Dataset | None, list[Problem]]:
    """Parse and validate a dataset folder; returns (dataset or None, every problem found).
    ``requires``: what each condition must carry (``rules.requires``)."""
    root = Path(root).resolve()
    manifest = root / MANIFEST
    chk = _Checker(manifest)
    if not root.is_dir():  # a typo in the path: one line, not two "missing" files
        return None, [Problem(str(root), None, None, "no such folder" if not root.exists()
                              else "not a folder")]
    header = read_header(root, chk)
    if not manifest.is_file():
        chk.problems.append(Problem(str(manifest), None, None, f"missing {MANIFEST}"))
        return None, chk.problems
    try:
        text = manifest.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: not UTF-8
        chk.problems.append(Problem(str(manifest), None, None, f"cannot be read: {e}"))
        return None, chk.problems
    instances: list[Instance] = []
    seen: dict[str, int] = {}
    folded: dict[str, int] = {}  # lower-cased id -> line: folders on case-insensitive disks
    # JSON Lines ends a line at "\n" only: str.splitlines() would also split at U+2028,
    # U+0085 and friends, which json.dumps(ensure_ascii=False) writes raw inside strings
    for line_no, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            chk.add(f"line {line_no}", None, f"not valid JSON: {e.msg}")
            continue
        except (ValueError, RecursionError) as e:  # huge integers, absurd nesting
            chk.add(f"line {line_no}", None, f"not valid JSON: {str(e)[:100]}")
            continue
        inst = parse_instance(obj, root, chk, line_no, check_audio, decode, requires=requires)
        iid = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(iid, str):
            if iid in seen:
                chk.add(iid, "id", f"duplicate id (first on line {seen[iid]}, again on line "
                        f"{line_no})")
                inst = None
            elif iid.lower() in folded:
                chk.add(iid, "id", f"differs only in letter case from the id on line "
                        f"{folded[iid.lower()]}; their folders would collide on "
                        "case-insensitive file systems")
                inst = None
            else:
                seen[iid] = line_no
            folded.setdefault(iid.lower(), line_no)
        if inst is not None:
            instances.append(inst)
    if not instances and not any(p.file == chk.file for p in chk.problems):
        # nothing to run is the dataset's problem, not an empty report's (no line refused)
        chk.add(None, None, "no instances (one JSON object a line: docs/dataset-format.md)")
    if chk.problems:
        return None, chk.problems
    return Dataset(root, str(header.get("name", root.name)), tuple(instances)), []


def load_dataset(root: Path | str, check_audio: bool = True, *, requires: Requires) -> Dataset:
    dataset, problems = check_dataset(root, check_audio, requires=requires)
    if problems:
        raise DatasetError(problems)
    return dataset


def bundled_root() -> Path:
    """The bundled fixture set shipped inside the package."""
    from importlib.resources import files

    return Path(str(files("pytest_duplexact.fixtures"))).resolve()


def dataset_summary(dataset: Dataset, audio_checked: bool = True) -> str:
    """``DIR: valid duplexact-dataset v1 'name', 72 instances: wait 9, ignore 6, ...``"""
    per_action = Counter(i.action for i in dataset.instances)
    counts = ", ".join(f"{a} {per_action[a]}" for a in taxonomy.ACTIONS)
    note = "" if audio_checked else " (audio files not opened: --no-audio)"
    return (f"{dataset.root}: valid {FORMAT_NAME} v{FORMAT_VERSION} {dataset.name!r}, "
            f"{len(dataset.instances)} instances: {counts}{note}")
