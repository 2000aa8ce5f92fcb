"""``recorded:DIR``: replay trials recorded earlier instead of running a model.

DIR is a run directory (``DIR/instances/<instance id>/``) or a folder of per-instance folders
(``DIR/<instance id>/``), each in the recording layout of recording_io.py: ``input.flac``,
``output.flac`` (or ``.wav``: both are read) and ``recording.json``. Folders with only the two
audio files (Full-Duplex-Bench style) carry no cue or barge-in information and replay Direct
Replay instances only.
The pipelines are bypassed: ``pipelines.run_instance`` returns the stored Recording.

Option ``native_transcript`` (default true): false drops the words stored with each recording
(a model's own transcript), so the run's transcriber hears the audio instead: what
``duplexact rescore`` does (cli/rescore.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ...data.annotations import Instance
from ...data.recording import Recording
from ...data.recording_io import (
    RecordingFormatError,
    has_metadata,
    load_recording,
    read_instance_id,
)
from ...data.suggest import not_a_folder
from ...data.taxonomy import Pipeline
from ..contract import DuplexModel, ModelError

_POINT = ("point recorded: at the run directory of an earlier run, or a folder of per-instance "
          "recordings (docs/models.md, \"Recording layout\")")


def replay_problem(root: Path | str, instance_ids) -> str | None:
    """Why ``recorded:DIR`` cannot replay any instance of the selection (None when it holds
    a recording of at least one; the ones it lacks are each instance's own error): checked
    before the run starts, so a folder that is not a run is one line, not an error per
    instance and a new run folder each time."""
    root = Path(root).expanduser()
    if not root.is_dir():
        return f"{root}: {not_a_folder(root)}; {_POINT}"
    ids = sorted(instance_ids)
    for iid in ids:
        for folder in (root / "instances" / iid, root / iid):
            if folder.is_dir():
                return None
    example = f", e.g. {root / 'instances' / ids[0]}" if ids else ""
    return (f"{root} holds no recording of the {len(ids)} selected instance(s) (looked for "
            f"{root / 'instances'}/<instance id>/ and {root}/<instance id>/{example}): {_POINT}")


class RecordedModel(DuplexModel):
    def __init__(self, root: Path | str, native_transcript: bool | str = True):
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise ValueError(f"recorded:{root}: {not_a_folder(self.root)}; {_POINT}")
        self.name = f"recorded:{root}"
        self.native_transcript = _flag(native_transcript, f"recorded:{root}: native_transcript")

    def folder_for(self, instance_id: str) -> Path | None:
        for folder in (self.root / "instances" / instance_id, self.root / instance_id):
            if folder.is_dir():
                return folder
        return None

    def recording_for(self, instance: Instance) -> Recording:
        folder = self.folder_for(instance.id)
        if folder is None:
            raise ModelError(f"{self.name}: no recording for instance {instance.id} (looked for "
                             f"{self.root / 'instances' / instance.id} and "
                             f"{self.root / instance.id})")
        stored = read_instance_id(folder)
        if stored is not None and stored != instance.id:
            raise ModelError(f"{folder}: recording.json is for instance {stored!r}, not "
                             f"{instance.id!r}")
        if not has_metadata(folder) and instance.pipeline is not Pipeline.DIRECT:
            raise ModelError(f"{folder}: no recording.json, so no cue / barge-in information; "
                             f"a folder of input and output audio alone can only replay Direct "
                             f"Replay instances, and {instance.id} is {instance.action} "
                             f"({instance.pipeline.value})")
        try:
            rec = load_recording(folder)
        except RecordingFormatError as e:
            raise ModelError(str(e)) from e
        if instance.pipeline is Pipeline.SIMULATOR and rec.cue is None:
            raise ModelError(f"{folder}: recording.json has no cue, but {instance.id} is a "
                             f"Simulator Replay instance ({instance.action})")
        return rec if self.native_transcript else replace(rec, transcript=())


def _flag(value: bool | str, label: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{label}={value!r}: use true or false")
