"""The run directory (docs/runs.md): every file name of a run, where it lives, how it is
written (atomic.py: write-then-rename) and how it is read back. The harness, the session,
resume (journal.py), ``explain`` and the HTML report all go through ``RunDir``, so a file's
name and format are spelled once.

    DIR/run.json, DIR/report.json, DIR/cache/,
    DIR/instances/<id>/{input.wav, output.wav, recording.json, timeline.json, error.txt,
                        outcome.json}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.atomic import PART_GLOB, write_text
from ..data.recording_io import INPUT_FILE, OUTPUT_FILE, RECORDING_FILE

RUN_FILE = "run.json"
REPORT_FILE = "report.json"
CACHE_DIR = "cache"
INSTANCES_DIR = "instances"
OUTCOME_FILE = "outcome.json"
TIMELINE_FILE = "timeline.json"
ERROR_FILE = "error.txt"
FINGERPRINT_KEY = "fingerprint"  # in outcome.json: the RunSettings it was scored under
USAGE_KEY = "usage"  # in outcome.json: the remote-service cost of the instance (usage.delta)

__all__ = ["CACHE_DIR", "ERROR_FILE", "FINGERPRINT_KEY", "INPUT_FILE", "INSTANCES_DIR",
           "OUTCOME_FILE", "OUTPUT_FILE", "RECORDING_FILE", "REPORT_FILE", "RUN_FILE",
           "RunDir", "TIMELINE_FILE", "USAGE_KEY", "claim_new", "json_text", "read_json_object",
           "write_json"]


def json_text(data: Any) -> str:
    """The run files' JSON: sorted keys, one-space indent, UTF-8 as is, a final newline."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: Path | str, data: Any, mode: int | None = None) -> None:
    """``mode``: ``atomic.FILE_MODE`` for an output the user named (a merge's ``-o``, a
    ``--duplexact-report`` copy); None: a run file's private 0600."""
    write_text(path, json_text(data), mode)


# deeper than any run file or report nests (a report: about 6): a hostile file may nest
# 100,000 deep, which json's parser and every reader walking it meet as a RecursionError
MAX_JSON_DEPTH = 64


def loads_bounded(text: str | bytes) -> Any:
    """``json.loads``, with nesting deeper than ``MAX_JSON_DEPTH`` a ValueError (never a
    RecursionError, here or in whatever walks the value later)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} deep") from None
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested more than {MAX_JSON_DEPTH} deep")
        level = [c for x in level if isinstance(x, (dict, list))
                 for c in (x.values() if isinstance(x, dict) else x)]
    return data


def read_json_object(path: Path) -> dict:
    """A JSON object from ``path``; OSError / ValueError (naming the file) otherwise."""
    data = loads_bounded(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{Path(path).name} is not a JSON object")
    return data


def claim_new(base: Path) -> Path:
    """The first of ``base``, ``base-2``, ``base-3``, ... that this process creates itself:
    ``mkdir`` is atomic, so of runs starting in the same second each gets its own folder
    (a check that a name is free, then a create, lets two runs pick the same one)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    k = 1
    while True:
        folder = base if k == 1 else base.with_name(f"{base.name}-{k}")
        try:
            folder.mkdir()
            return folder.resolve()
        except FileExistsError:
            k += 1


@dataclass(frozen=True)
class RunDir:
    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    # --- where ------------------------------------------------------------------------------

    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    @property
    def report_file(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def cache_dir(self) -> Path:
        return self.root / CACHE_DIR

    @property
    def instances(self) -> Path:
        return self.root / INSTANCES_DIR

    def instance(self, instance_id: str) -> Path:
        return self.instances / instance_id

    def relative(self, folder: Path) -> str:
        """A folder of the run as the report names it (``recording``: run-dir relative)."""
        return Path(folder).relative_to(self.root).as_posix()

    def folder(self, recording: str) -> Path:
        """The instance folder a report's ``recording`` names."""
        return self.root / recording

    # --- run.json and report.json ------------------------------------------------------------

    def write_run(self, settings: dict, package_version: str, fingerprint: str) -> None:
        write_json(self.run_file, {"settings": settings, "package_version": package_version,
                                   "fingerprint": fingerprint})

    def read_run_settings(self) -> dict:
        """run.json's ``settings``; KeyError / ValueError / TypeError when damaged."""
        return json.loads(self.run_file.read_text(encoding="utf-8"))["settings"]

    def write_report(self, report: dict) -> None:
        write_json(self.report_file, report)

    def drop_report(self) -> None:
        self.report_file.unlink(missing_ok=True)

    # --- one instance -----------------------------------------------------------------------

    def reopen(self, instance_id: str) -> Path:
        """Before an instance (re)runs, its folder stops being a finished one: the outcome
        goes first, so a run killed mid-instance never leaves an old outcome beside new
        files; temporaries of a killed attempt go too."""
        folder = self.instance(instance_id)
        for name in (OUTCOME_FILE, ERROR_FILE):
            (folder / name).unlink(missing_ok=True)
        for tmp in folder.glob(PART_GLOB):
            tmp.unlink(missing_ok=True)
        return folder

    def write_timeline(self, instance_id: str, timeline: dict) -> None:
        write_json(self.instance(instance_id) / TIMELINE_FILE, timeline)

    def write_error(self, instance_id: str, text: str) -> None:
        write_text(self.instance(instance_id) / ERROR_FILE, text)

    def write_outcome(self, instance_id: str, outcome: dict, fingerprint: str | None,
                      usage: dict | None) -> None:
        """The journal entry, written last: the instance is finished once it exists."""
        write_json(self.instance(instance_id) / OUTCOME_FILE,
                   {**outcome, FINGERPRINT_KEY: fingerprint, USAGE_KEY: usage})

    @staticmethod
    def read_outcome(folder: Path) -> dict:
        return read_json_object(Path(folder) / OUTCOME_FILE)

    @staticmethod
    def read_timeline(folder: Path) -> dict:
        return read_json_object(Path(folder) / TIMELINE_FILE)

    @staticmethod
    def read_recording_meta(folder: Path) -> dict:
        return read_json_object(Path(folder) / RECORDING_FILE)

    @staticmethod
    def tracks(folder: Path) -> dict[str, Path]:
        """The instance's audio files that exist: ``{"input": ..., "output": ...}``."""
        from ..data.recording_io import track_file  # input.flac or input.wav

        out = {}
        for name in ("input", "output"):
            path = track_file(folder, name)
            if path.is_file():
                out[name] = path
        return out
