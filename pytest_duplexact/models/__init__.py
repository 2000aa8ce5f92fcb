"""Finding a model by name (docs/models.md).

``resolve_model(spec, **options)`` accepts, in this order:

1. ``recorded:DIR`` — replay a folder of saved recordings (models/providers/recorded.py);
2. a built-in name (``BUILTINS``, models/catalogue/builtins.py): silent, oracle, endpoint, gpt-realtime, gemini-live,
   grok-voice, qwen-omni-realtime, minicpm-o, moshi, bridge (any server speaking the bridge
   protocol, docs/bridge-protocol.md), raon-speechchat, by name the models behind our
   model bridges: flm-audio, bayling-duplex, voila (models/catalogue/model_bridges.py), and the models
   behind their authors' own servers: freeze-omni, vita-1.5, lychee-fd, mini-omni2;
3. ``package.module:factory`` — an import path to a factory (class or function);
4. a name registered in the ``pytest_duplexact.models`` entry-point group.

``preflight(spec, **options)`` checks the same without building the model. The factory is
called with ``options`` as keyword arguments (strings when they come from the
command line) and must return a stepped or streaming model (models/contract.py). Modules are
imported only when named, so a missing optional dependency only matters to its model. What
each built-in needs (packages, keys, checkpoint files) is declared in its row of
models/catalogue/builtins.py and checked before its module is imported.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from importlib.metadata import entry_points
from typing import Any

from . import moved
from .adapter import Adapter, adapter_for, traits
from .catalogue.builtins import BUILTINS, RECORDED
from .contract import (
    DuplexModel,
    ModelError,
    SessionInfo,
    StepOutput,
    SteppedModel,
    StreamingModel,
)
from .model_options import value_problem

moved.install()  # the paths of before models/ was arranged by role, for one release

ENTRY_POINT_GROUP = "pytest_duplexact.models"
RECORDED_PREFIX = "recorded:"

class UnknownModel(LookupError):
    pass


def is_stepped(model: Any) -> bool:
    return not isinstance(model, type) and isinstance(model, SteppedModel)


def is_batched(model: Any) -> bool:
    """A stepped model that also offers the batched contract (base.BatchedSteppedModel)."""
    return is_stepped(model) and traits(model).batched


def is_streaming(model: Any) -> bool:
    return not isinstance(model, type) and isinstance(model, StreamingModel)


def is_recorded(model: Any) -> bool:
    """Models that return stored trials instead of running (models/providers/recorded.py)."""
    return not isinstance(model, type) and traits(model).recorded


def _import(module_name: str):
    """Import a model's module; when its top-level package is not importable, look in the
    working directory too (``pytest``, unlike ``python -m pytest``, leaves it off sys.path, so
    ``--duplexact-model=my_duplex.model:factory`` failed from the project's own folder)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        top = module_name.split(".")[0]
        cwd = os.getcwd()
        if e.name != top or cwd in sys.path or not (
                os.path.isdir(os.path.join(cwd, top)) or os.path.isfile(os.path.join(cwd,
                                                                                    top + ".py"))):
            raise
        sys.path.insert(0, cwd)
        return importlib.import_module(module_name)


def _load(target: str, spec: str):
    module_name, _, attr = target.partition(":")
    try:
        obj = _import(module_name)
    except ImportError as e:
        raise UnknownModel(f"model {spec!r}: cannot import module {module_name!r}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownModel(f"model {spec!r}: module {module_name!r} has no attribute "
                               f"{attr!r}") from None
    return obj


def _entry_point(name: str):
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep
    return None


def registered_names() -> list[str]:
    """Built-ins first, then installed entry points."""
    return list(BUILTINS) + sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
                                   - set(BUILTINS))


def factory_for(spec: str):
    """What ``spec`` names: the factory to call (or a ready object)."""
    if spec in BUILTINS:
        return _load(BUILTINS[spec].factory, spec)
    if ":" in spec:
        return _load(spec, spec)
    ep = _entry_point(spec)
    if ep is None:
        close = difflib.get_close_matches(spec, registered_names(), n=1)
        raise UnknownModel(
            f"unknown model {spec!r}{f' (did you mean {close[0]!r}?)' if close else ''}. "
            f"Known: {', '.join(registered_names())}, "
            f"recorded:DIR, or an import path 'package.module:factory' (docs/models.md)")
    try:
        return ep.load()
    except Exception as e:
        raise UnknownModel(f"model {spec!r}: entry point {ep.value!r} failed to load: "
                           f"{type(e).__name__}: {e}") from e


def _recorded(spec: str, options: dict):
    unknown = [k for k in options if k != "native_transcript"]
    if unknown:
        raise ValueError(f"model {spec!r} takes only the option native_transcript "
                         f"(got {', '.join(unknown)})")
    return _load(RECORDED.factory, spec)(spec[len(RECORDED_PREFIX):], **options)


def _check_options(factory, options: dict, spec: str) -> None:
    if not callable(factory):
        if options:
            raise ValueError(f"model {spec!r} is an object, not a factory; it takes no options "
                             f"(got {', '.join(options)})")
        return
    try:
        sig = inspect.signature(factory)
        sig.bind(**options)
    except TypeError as e:
        raise ValueError(f"model {spec!r} does not accept these options "
                         f"({', '.join(options) or 'none'}): {e}; its factory takes "
                         f"{adapter_for(factory).__name__}{sig}") from None
    except ValueError:  # no signature available (builtins, C extensions): just call it
        return
    for name, value in options.items():
        param = sig.parameters.get(name)
        if param is not None:
            problem = value_problem(param.annotation, param.default, value)
            if problem:
                declared = str(param).replace(repr(param.annotation), str(param.annotation))
                raise ValueError(f"option {name}={value}: expected {problem}, as its factory "
                                 f"declares ({declared})")


def _check_needs(spec: str, options: dict) -> None:
    """A built-in's packages and files, before its module is imported (requirements.py)."""
    row = BUILTINS.get(spec)
    if row is not None:
        row.check(spec, options)


def preflight(spec: str, **options) -> None:
    """Check, without building the model (no weights loaded, no connection), that ``spec``
    names a model and ``options`` fit its factory; then run the factory's own
    ``preflight(**options)`` if it has one (e.g. an API key check). Raises with a message
    for the user."""
    spec = spec.strip()
    if spec.startswith(RECORDED_PREFIX):
        _recorded(spec, options)
        return
    _check_needs(spec, options)
    factory = factory_for(spec)
    _check_options(factory, options, spec)
    if callable(factory):
        adapter_for(factory).preflight(**options)


def probe(spec: str, **options):
    """For a model behind a server: connect once, as the run's preflight (after
    ``preflight``), and say what answered (``base.Probed``), through the factory's
    ``probe(**options)``, else its ``reach(**options)`` (a description only); None for a
    model with neither. Raises with the client's one-line message when nothing usable
    answers."""
    spec = spec.strip()
    if spec.startswith(RECORDED_PREFIX):
        return None
    factory = factory_for(spec)
    return adapter_for(factory).probe(**options) if callable(factory) else None


def resolve_model(spec: str, **options) -> Any:
    """The model object for ``spec`` (see module doc); raises ``UnknownModel`` with the list of
    known names when nothing matches."""
    spec = spec.strip()
    if spec.startswith(RECORDED_PREFIX):
        return _recorded(spec, options)
    _check_needs(spec, options)
    factory = factory_for(spec)
    _check_options(factory, options, spec)
    model = adapter_for(factory)(**options) if callable(factory) else factory
    if not (is_stepped(model) or is_streaming(model) or is_recorded(model)):
        raise TypeError(
            f"model {spec!r}: the factory returned {type(model).__name__}, which is neither a "
            "SteppedModel (sample_rate, frame_size, start, step, finish) nor a StreamingModel "
            "(input_sample_rate, output_sample_rate, async connect); see docs/models.md")
    return model


__all__ = [
    "Adapter", "BUILTINS", "DuplexModel", "ENTRY_POINT_GROUP", "ModelError", "SessionInfo",
    "SteppedModel", "StepOutput",
    "StreamingModel", "UnknownModel", "factory_for", "is_recorded", "is_stepped", "is_streaming",
    "preflight", "probe", "registered_names", "resolve_model",
]
