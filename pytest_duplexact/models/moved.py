"""The import paths that moved when models/ was arranged by role: each old one still imports,
for one release, as the very module at its new path, with a DeprecationWarning naming it
(``from pytest_duplexact.models.base import StepOutput`` keeps working; docs/architecture.md,
"Moved modules")."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_M = "pytest_duplexact.models."
MOVED = {_M + old: _M + new for old, new in {
    "base": "contract", "streaming": "streaming_contract",
    "builtins": "catalogue.builtins", "requirements": "catalogue.requirements",
    "paper_models": "catalogue.paper_models", "bridged": "providers.named_bridge",
    "openai_realtime": "providers.gpt_realtime", "minicpm_duplex": "providers.minicpm_o",
    **{m: "providers." + m for m in (
        "silent", "oracle", "endpoint", "recorded", "gemini_live", "realtime_dialects",
        "vllm_omni", "moshi", "moshi_server", "bridge", "raon_speechchat", "socketio_omni",
        "lychee_fd", "mini_omni2")},
    **{m: "util." + m for m in ("http_server", "server_session", "pcm", "words", "playback")},
}.items()}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path only (after every real finder) and hands over the new module."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path goes "
                      "in the next release)", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """The module is the new path's, already run."""


def install() -> None:
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.append(_OldPaths())
