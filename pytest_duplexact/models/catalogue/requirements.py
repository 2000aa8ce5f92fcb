"""What a built-in model needs to run here, and its row in the table of built-ins
(models/catalogue/builtins.py, docs/models.md §3).

A ``Builtin`` row says where the model's factory is (an import path, imported only when the
model is named), how ``duplexact models`` shows it, and what it needs: the Python packages it
imports, the environment variables it reads (API keys), and the options that must name local
files (checkpoints). Everything is checked without importing the packages or opening the files'
contents, so ``duplexact models`` can list every model on a machine that has none of them, and
``models.preflight`` can fail a run with one message that names everything missing before the
adapter module is even imported.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..contract import ModelError

# Hub addresses a user might copy from a model card: we never download, so say so.
_REMOTE_PREFIXES = ("hf://", "http://", "https://", "s3://", "gs://")

# moshi 0.2.13 pins torch<2.10: installed without its dependencies, then the ones its model
# code imports, in its own ranges (safetensors and huggingface_hub newer than it declares work:
# the tests run them); README "Installing the moshi adapter" explains it
MOSHI_INSTALL = ("pip install --no-deps moshi==0.2.13 && pip install 'sphn>=0.2,<0.3' "
                 "'sentencepiece>=0.2,<0.3' 'einops>=0.7,<0.9' 'safetensors>=0.4' "
                 "'huggingface_hub>=0.24'")


@dataclass(frozen=True)
class Package:
    module: str  # the import name; found with importlib.util.find_spec, never imported
    install: str  # what to run (or which extra to install) to get it


@dataclass(frozen=True)
class FileOption:
    option: str  # the --duplexact-model-option key
    what: str  # what the file is, for messages
    required: bool = True


@dataclass(frozen=True)
class Builtin:
    """One built-in model: its factory, what ``duplexact models`` shows, what it needs."""

    factory: str  # "package.module:attr", imported only when the model is named
    summary: str  # one line: what the model is
    kind: str  # "stepped", "streaming" or "replay"
    packages: tuple[Package, ...] = ()
    env: tuple[str, ...] = ()  # environment variables that must be set (keys: never printed)
    files: tuple[FileOption, ...] = ()
    # a hosted service that bills its use (the run's estimate and --duplexact-max-cost:
    # spend/estimate.py); a model on the user's own machine or server bills nothing
    billed: bool = False

    def missing_packages(self) -> list[Package]:
        return [p for p in self.packages if not _importable(p.module)]

    def missing_env(self) -> list[str]:
        return [k for k in self.env if not os.environ.get(k)]

    def file_problems(self, options: Mapping[str, object]) -> list[str]:
        """One line per file option that is required and absent, or given and not a local
        file."""
        return [p for f in self.files for p in file_problem(f, options.get(f.option))]

    def install_hints(self) -> dict[str, list[str]]:
        """Each install command that brings missing packages, with the packages it brings
        (several packages of one model share one command: said once)."""
        hints: dict[str, list[str]] = {}
        for p in self.missing_packages():
            hints.setdefault(p.install, []).append(p.module)
        return hints

    def problems(self, options: Mapping[str, object], keys: bool = True) -> list[str]:
        out = [f"package{'s' if len(mods) > 1 else ''} "
               f"{', '.join(repr(m) for m in mods)} {'are' if len(mods) > 1 else 'is'} not "
               f"installed ({install})" for install, mods in self.install_hints().items()]
        if keys:
            out += [f"environment variable {k} is not set" for k in self.missing_env()]
        return out + self.file_problems(options)

    def check(self, name: str, options: Mapping[str, object]) -> None:
        """Raise ``NotReady`` naming every missing package and file of built-in ``name``."""
        # a missing key is the adapter's own preflight's to explain (where to get it, which
        # provider): here only what must exist before its module can even be imported
        problems = self.problems(options, keys=False)
        if problems:
            raise NotReady(f"model {name!r} cannot run here: " + "; ".join(problems))


def file_problem(f: FileOption, value: object) -> list[str]:
    if value is None or str(value) == "":
        return [f"option {f.option} ({f.what}) is not set; pass --duplexact-model-option "
                f"{f.option}=PATH"] if f.required else []
    return local_file_problem(f.option, f.what, str(value))


def local_file_problem(option: str, what: str, value: str) -> list[str]:
    if value.startswith(_REMOTE_PREFIXES):
        return [f"option {option} ({what}) is {value!r}, which is not a local file: nothing is "
                f"downloaded; fetch the file yourself and pass its path"]
    path = Path(value).expanduser()
    if path.is_file():
        return []
    hint = ""
    if not path.is_absolute() and value.count("/") == 1 and not path.parent.exists():
        hint = " (it looks like a hub repository id; nothing is downloaded: pass a local path)"
    return [f"option {option} ({what}): no such file {value!r}{hint}"]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


class NotReady(ModelError):
    """A built-in model cannot run here; the message lists everything that is missing (a
    ``ModelError`` like the adapters' own configuration errors)."""

