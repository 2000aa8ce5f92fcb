"""The adapter contract with its defaults: what the run asks of a model's factory before it
builds the model (``Adapter``), and what it reads of a built model besides the stepped or
streaming protocol (``Traits``).

Every built-in factory is an ``Adapter``: ``preflight`` checks the options without
connecting, ``probe`` connects once and says what answered (``reach``, a description only, is
the short form of it), each a method with a default, so the run calls them on every model
alike. A user's plain factory (``--duplexact-model=mypkg.model:factory``, a function or a
class) is wrapped at the registry's boundary by ``adapter_for``, keeping the hooks it declares
(docs/models.md: ``factory.preflight``, a classmethod ``preflight``), each found through its
protocol (``Preflighted``, ``Reaching``, ``Probing``). ``traits`` is the one place the package
reads a model's optional declarations (``unsupported``, ``pipelines``, ``max_concurrency``,
the batched and recorded contracts, ...): declared with their defaults by
``contract.DuplexModel``, each found on a plain model through its protocol there.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Callable, Protocol, runtime_checkable

from .contract import (
    Batched,
    Capped,
    Chunked,
    Connecting,
    DuplexModel,
    Framed,
    Named,
    Pipelined,
    Probed,
    Recorded,
    Refusing,
    ResettingSlotsAlone,
    RetryingTransient,
    SampleRated,
    Stepping,
    SteppingMany,
    pipeline_refusal,
)

Hook = Callable[..., Any]


class Adapter:
    """A model's factory: ``adapter(**options)`` builds the model; the hooks run before.

    Built from the function (or class) that builds the model, with the hooks it has:
    ``Adapter(factory, preflight=check, reach=reach)``. A hook not given keeps its default:
    ``preflight`` checks nothing beyond the factory's signature, ``reach`` and ``probe``
    connect nowhere (None: nothing to ask before the run)."""

    def __init__(self, build: Hook, *, preflight: Hook | None = None,
                 reach: Hook | None = None, probe: Hook | None = None,
                 name: str | None = None):
        self.build = build
        self._preflight, self._reach, self._probe = preflight, reach, probe
        self.__name__ = name or build.__name__
        self.__qualname__ = self.__name__
        self.__doc__ = build.__doc__
        self.__module__ = build.__module__
        try:  # the options a user may pass are the build function's parameters
            self.__signature__ = inspect.signature(build)
        except (TypeError, ValueError):  # no signature (builtins, C extensions)
            self.__signature__ = None

    def __call__(self, **options: Any) -> Any:
        return self.build(**options)

    def __repr__(self) -> str:
        return f"<Adapter {self.__module__}.{self.__name__}>"

    def preflight(self, **options: Any) -> None:
        """Check ``options`` without loading weights or connecting; raise with a message."""
        if self._preflight is not None:
            self._preflight(**options)

    def reach(self, **options: Any) -> str | None:
        """Connect once; a one-line description of what answered (None: nothing to reach)."""
        if self._reach is not None:
            return self._reach(**options)
        probed = self._probe(**options) if self._probe is not None else None
        return probed.description if probed is not None else None

    def probe(self, **options: Any) -> Probed | None:
        """Connect once, as the run's preflight: what answered (``Probed``), or None for a
        model with no server to ask."""
        if self._probe is not None:
            return self._probe(**options)
        described = self._reach(**options) if self._reach is not None else None
        return Probed(described) if described is not None else None


@runtime_checkable
class Preflighted(Protocol):
    """A user's plain factory with its own check (``factory.preflight = check``, or a
    classmethod: docs/models.md)."""

    def preflight(self, **options: Any) -> None: ...


@runtime_checkable
class Reaching(Protocol):
    def reach(self, **options: Any) -> str | None: ...


@runtime_checkable
class Probing(Protocol):
    def probe(self, **options: Any) -> Probed | None: ...


def adapter_for(factory: Any) -> Adapter:
    """``factory`` as an ``Adapter``: itself when it is one, else a user's plain factory
    wrapped with the hooks it declares (the only place those are looked up)."""
    if isinstance(factory, Adapter):
        return factory
    return Adapter(factory, preflight=factory.preflight if isinstance(factory, Preflighted)
                   else None,
                   reach=factory.reach if isinstance(factory, Reaching) else None,
                   probe=factory.probe if isinstance(factory, Probing) else None,
                   name=_name(factory))


def _name(factory: Any) -> str:
    """A function's or a class's own name; another callable (an object with ``__call__``, a
    ``functools.partial``) is named by its type."""
    if isinstance(factory, (type, FunctionType, BuiltinFunctionType, MethodType)):
        return factory.__name__
    return type(factory).__name__


@dataclass(frozen=True)
class Traits:
    """What the run reads of a built model besides its protocol, each with its default
    (``contract.DuplexModel``). Two models that declare the same have equal traits: the hooks,
    bound to their own model, are not compared."""

    name: str
    pipelines: tuple[str, ...] | None  # the pipelines it runs (None: all)
    unsupported: Hook | None = field(compare=False)  # ``unsupported(pipeline)``: why not
    max_concurrency: int | None  # trials at once its server takes (None: no limit of its own)
    batched: bool  # offers the batched stepped contract (contract.BatchedSteppedModel)
    recorded: bool  # returns stored trials instead of running (providers/recorded.py)
    retries_transient: bool  # a stepped model across a network that may fail transiently
    async_connect: bool  # has the streaming contract's ``async connect`` (a class, unbuilt)
    steps: bool  # has the stepped contract's ``step`` (a class, unbuilt)
    sample_rate: Any  # a stepped model's, as declared (checked by the stepped duplex)
    frame_size: Any
    step_many: Hook | None = field(compare=False)  # ``step_many(frames)``, when it answers
    # for the model's own step
    slots_reset_alone: bool  # batched: a slot's start resets it without the others
    chunk_ms: Any  # a streaming model's input chunk (None: the contract's default)

    def why_unsupported(self, pipeline: str) -> str | None:
        """Why this model cannot run ``pipeline`` (None when it can)."""
        if self.unsupported is not None:
            return self.unsupported(pipeline)
        return pipeline_refusal(self.name, self.pipelines, pipeline)


def traits(model: Any) -> Traits:
    """The optional declarations of ``model`` (an object, or a class for ``async_connect`` and
    ``steps``): a ``DuplexModel`` has them all; a plain model, those it declares, the others
    at ``DuplexModel``'s defaults."""
    name = model.name if isinstance(model, Named) else DuplexModel.name
    return Traits(
        name=str(name or type(model).__name__),
        pipelines=(model.pipelines if isinstance(model, Pipelined) else
                   DuplexModel.pipelines) or None,
        unsupported=model.unsupported if isinstance(model, Refusing) else None,
        max_concurrency=model.max_concurrency if isinstance(model, Capped) else
        DuplexModel.max_concurrency,
        batched=isinstance(model, Batched),
        recorded=isinstance(model, Recorded),
        retries_transient=bool(model.retries_transient if isinstance(model, RetryingTransient)
                               else DuplexModel.retries_transient),
        async_connect=isinstance(model, Connecting)
        and inspect.iscoroutinefunction(model.connect),
        steps=isinstance(model, Stepping),
        sample_rate=model.sample_rate if isinstance(model, SampleRated) else None,
        frame_size=model.frame_size if isinstance(model, Framed) else None,
        step_many=_step_many(model),
        slots_reset_alone=bool(model.slots_reset_alone if isinstance(model, ResettingSlotsAlone)
                               else DuplexModel.slots_reset_alone),
        chunk_ms=model.chunk_ms if isinstance(model, Chunked) else DuplexModel.chunk_ms)


def _step_many(model: Any) -> Hook | None:
    """``model.step_many`` when it answers for the model's own ``step``: a subclass that
    overrides ``step`` but inherits ``step_many`` (a crashing or speaking variant of the
    silent model) must be stepped frame by frame, or its ``step`` would never run."""
    if not isinstance(model, SteppingMany):
        return None
    if "step_many" in _own(model):
        return model.step_many  # set on the instance

    def owner(name: str):
        return next((c for c in type(model).__mro__ if name in vars(c)), None)

    step_owner, many_owner = owner("step"), owner("step_many")
    if step_owner is None or many_owner is None or not issubclass(many_owner, step_owner):
        return None
    return model.step_many


def _own(obj: Any) -> dict:
    """What is set on ``obj`` itself (nothing for an object with ``__slots__``)."""
    try:
        return vars(obj)
    except TypeError:
        return {}
