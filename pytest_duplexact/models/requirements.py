"""What each built-in model needs to run here, declared as data (docs/models.md §3).

One ``Requirements`` entry per built-in name in ``REQUIREMENTS``: the Python packages it imports,
the environment variables it reads (API keys), and the options that must name local files
(checkpoints). Everything is checked without importing the packages or opening the files'
contents, so ``duplexact models`` can list every model on a machine that has none of them, and
``models.preflight`` can fail a run with one message that names everything missing before the
adapter module is even imported. A new adapter adds one entry here beside its ``BUILTINS`` line.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .base import ModelError

# Hub addresses a user might copy from a model card: we never download, so say so.
_REMOTE_PREFIXES = ("hf://", "http://", "https://", "s3://", "gs://")

MOSHI_INSTALL = ("pip install --no-deps moshi==0.2.13 && pip install sphn sentencepiece "
                 "einops safetensors huggingface_hub  (see .ci/run)")


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
class Requirements:
    summary: str  # one line: what the model is
    kind: str  # "stepped", "streaming" or "replay"
    packages: tuple[Package, ...] = ()
    env: tuple[str, ...] = ()  # environment variables that must be set (keys: never printed)
    files: tuple[FileOption, ...] = ()

    def missing_packages(self) -> list[Package]:
        return [p for p in self.packages if not _importable(p.module)]

    def missing_env(self) -> list[str]:
        return [k for k in self.env if not os.environ.get(k)]

    def file_problems(self, options: Mapping[str, object]) -> list[str]:
        """One line per file option that is required and absent, or given and not a local
        file."""
        return [p for f in self.files for p in file_problem(f, options.get(f.option))]

    def problems(self, options: Mapping[str, object], keys: bool = True) -> list[str]:
        out = [f"package {p.module!r} is not installed ({p.install})"
               for p in self.missing_packages()]
        if keys:
            out += [f"environment variable {k} is not set" for k in self.missing_env()]
        return out + self.file_problems(options)


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


_OPENAI = (Package("openai", "core dependency of pytest-duplexact"),
           Package("websockets", "pip install 'openai[realtime]'"))
_WEBSOCKETS = (Package("websockets", "core dependency of pytest-duplexact"),)

REQUIREMENTS: dict[str, Requirements] = {
    "silent": Requirements("digital silence in every frame: the lower bound", "stepped"),
    "oracle": Requirements("privileged reference: performs each expected action with the "
                           "instance's own clips", "stepped"),
    "endpoint": Requirements("cascade baseline: energy endpointing, then one fixed spoken "
                             "reply", "stepped"),
    "gpt-realtime": Requirements("OpenAI Realtime API (hosted)", "streaming", packages=_OPENAI,
                                 env=("OPENAI_API_KEY",)),
    # the key may be GEMINI_API_KEY or GOOGLE_API_KEY: the adapter's preflight checks either
    "gemini-live": Requirements("Google Gemini Live API (hosted; GEMINI_API_KEY or "
                                "GOOGLE_API_KEY)", "streaming",
                                packages=(Package("google.genai",
                                                  "pip install 'pytest-duplexact[gemini]'"),)),
    "grok-voice": Requirements("xAI Grok Voice Agent API (hosted, OpenAI Realtime dialect)",
                               "streaming", packages=_OPENAI, env=("XAI_API_KEY",)),
    "qwen-omni-realtime": Requirements("Alibaba DashScope Qwen-Omni Realtime (hosted, OpenAI "
                                       "Realtime dialect)", "streaming", packages=_OPENAI,
                                       env=("DASHSCOPE_API_KEY",)),
    # the server URL is an option, checked by the adapter's own preflight; its key is optional
    "minicpm-o": Requirements("MiniCPM-o behind its duplex demo server (server_url option)",
                              "streaming", packages=(Package("websockets",
                                                             "pip install 'openai[realtime]'"),)),
    "moshi": Requirements(
        "Kyutai Moshi from local checkpoint files (moshi 0.2.13)", "stepped",
        packages=(Package("moshi", MOSHI_INSTALL), Package("sentencepiece", MOSHI_INSTALL),
                  Package("safetensors", MOSHI_INSTALL), Package("einops", MOSHI_INSTALL),
                  Package("huggingface_hub", MOSHI_INSTALL)),
        files=(FileOption("mimi_weights", "Mimi codec weights, .safetensors"),
               FileOption("lm_weights", "Moshi LM weights, .safetensors"),
               FileOption("tokenizer", "SentencePiece text tokenizer, .model"),
               FileOption("lm_config", "LM config.json; default: Moshi 7B", required=False),
               FileOption("mimi_config", "Mimi config json; default: the released Mimi",
                          required=False))),
    # the server URL is an option, checked (and the server probed) by the adapter itself
    "bridge": Requirements("any model behind the duplexact bridge protocol v1 (url option; "
                           "docs/bridge-protocol.md)", "stepped or streaming, as the server "
                           "says", packages=_WEBSOCKETS),
    "raon-speechchat": Requirements("Raon-SpeechChat behind its demo gateway, natively (url "
                                    "option)", "streaming", packages=_WEBSOCKETS),
}

# Not a BUILTINS name: a prefix (models/__init__.py), listed by `duplexact models` all the same.
RECORDED = Requirements("replays recordings saved earlier (recorded:DIR, a run directory)",
                        "replay")


class NotReady(ModelError):
    """A built-in model cannot run here; the message lists everything that is missing (a
    ``ModelError`` like the adapters' own configuration errors)."""


def check(name: str, options: Mapping[str, object]) -> None:
    """Raise ``NotReady`` naming every missing package, key and file of built-in ``name``
    (nothing for names without an entry)."""
    req = REQUIREMENTS.get(name)
    if req is None:
        return
    # a missing key is the adapter's own preflight's to explain (where to get it, which
    # provider): here only what must exist before its module can even be imported
    problems = req.problems(options, keys=False)
    if problems:
        raise NotReady(f"model {name!r} cannot run here: " + "; ".join(problems))
