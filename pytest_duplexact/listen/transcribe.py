"""Transcription of model speech behind one interface (SPEC §2, §4).

Sources, in order of preference per model: the model's native time-aligned transcript
(handled in segmentation.py), or a ``Transcriber`` backend registered here by name.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..data.timeline import Word


@runtime_checkable
class Transcriber(Protocol):
    name: str  # stable id, part of cache keys and of the report

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> Sequence[Word]:
        """Timed words, seconds relative to the start of ``audio``."""
        ...


# Backends by name; modules are imported only when named, so a missing optional dependency
# (faster-whisper, a network client) only matters to its own backend.
BUILTINS: dict[str, str] = {
    "offline": "pytest_duplexact.listen.transcribe_offline:OfflineTranscriber",  # the default
    "tiny.en": "pytest_duplexact.listen.transcribe_offline:tiny_en",
    "base": "pytest_duplexact.listen.transcribe_offline:base",  # the asr-base extra
    "whisper-1": "pytest_duplexact.listen.transcribe_openai:OpenAITranscriber",
}
OPENAI_PREFIX = "openai:"  # openai:<model>, e.g. openai:whisper-1
# Context the harness offers every backend; one that has no use for it does not take it.
_CONTEXT = ("cache_dir", "lazy", "base_url", "policy")


# --duplexact-transcriber values that run on this machine and bill nothing (None: unset)
LOCAL_SETTINGS = (None, "auto", "native", "offline", "tiny.en", "base")


class UnknownTranscriber(LookupError):
    pass


def is_local(setting: str | None) -> bool:
    """Whether a --duplexact-transcriber value needs no key and no network."""
    return setting in LOCAL_SETTINGS


def is_openai(setting: str | None) -> bool:
    """Whether a --duplexact-transcriber value is OpenAI's transcription API (needs its key)."""
    return bool(setting) and (setting == "whisper-1" or setting.startswith(OPENAI_PREFIX))


def transcriber_names() -> list[str]:
    return list(BUILTINS) + [f"{OPENAI_PREFIX}MODEL", "package.module:factory"]


def _factory(name: str):
    import importlib

    if name in BUILTINS:
        target = BUILTINS[name]
    elif name.startswith(OPENAI_PREFIX):
        target = BUILTINS["whisper-1"]
    elif ":" in name:
        target = name
    else:
        raise UnknownTranscriber(f"unknown transcriber {name!r}; known: "
                                 f"{', '.join(transcriber_names())}")
    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise UnknownTranscriber(f"transcriber {name!r}: cannot load {target!r}: {e}") from e
    return obj


def check_name(name: str) -> None:
    """Raise UnknownTranscriber unless ``name`` names a transcriber that can be loaded."""
    _factory(name.strip())


def get_transcriber(name: str, **opts) -> Transcriber:
    """The transcriber registered as ``name`` (``BUILTINS``, ``openai:<model>`` or an import
    path ``package.module:factory``), built with ``opts``.

    ``cache_dir`` (a folder) becomes the backend's request cache; ``cache_dir``, ``lazy`` and
    ``base_url`` are context a backend may not use, and are dropped when it does not take
    them (or when None). Any other option the backend does not accept is an error."""
    import inspect

    factory = _factory(name.strip())
    opts = {k: v for k, v in opts.items() if v is not None}
    if name.startswith(OPENAI_PREFIX):
        opts.setdefault("model", name[len(OPENAI_PREFIX):])
    elif name == "whisper-1":
        opts.setdefault("model", "whisper-1")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature: pass what was asked
        params = None
    takes_any = params is None or any(p.kind is p.VAR_KEYWORD for p in params.values())

    def takes(key: str) -> bool:
        return takes_any or key in params

    if "cache_dir" in opts and takes("cache") and not (params and "cache_dir" in params):
        from ..remote.cache import RequestCache

        opts["cache"] = RequestCache(opts.pop("cache_dir"))
    for key in _CONTEXT:
        if key in opts and not takes(key):
            del opts[key]
    unknown = [k for k in opts if not takes(k)]
    if unknown:
        raise ValueError(f"transcriber {name!r} does not take option(s) {', '.join(unknown)}")
    made = factory(**opts)
    if not isinstance(made, Transcriber):
        raise TypeError(f"transcriber {name!r}: the factory returned {type(made).__name__}, "
                        "which has no name and transcribe(audio, sample_rate)")
    return made
