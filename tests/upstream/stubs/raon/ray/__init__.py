"""An in-process stand-in for Ray, enough for Raon-SpeechChat-Demo's gateway
(``launch_gateway.py``, ``gateway/server.py``) and the authors' router and worker actors
(``router/actor.py``, ``worker/actor.py``) to run unchanged in one process.

What it keeps of Ray's semantics: ``@ray.remote`` classes become actors, each on its own
thread with its own event loop; calls are queued and run one at a time in call order (a
sync actor's ``max_concurrency=1``), async methods interleave on the actor's loop as in an
async actor; ``method.remote()`` returns a ref that can be awaited on any loop or passed to
``ray.get``; named actors are found with ``ray.get_actor``. ``ray.init`` stands up what
``launch_worker.py --role head`` would have started in the worker container (the router and
the worker actors), through ``raon_cluster.start``: the harness's stub engine, not Ray's.
Arguments are passed by reference, not serialized (nothing here relies on copies).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from typing import Any

__version__ = "0.0-duplexact-stub"
_named: dict[tuple[str, str], "ActorHandle"] = {}
_lock = threading.Lock()
_started = False


class ObjectRef:
    def __init__(self, fut: concurrent.futures.Future):
        self._fut = fut

    def __await__(self):
        return asyncio.wrap_future(self._fut).__await__()

    def result(self, timeout: float | None = None) -> Any:
        return self._fut.result(timeout)


class _Method:
    def __init__(self, actor: "ActorHandle", name: str):
        self._actor, self._name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        return self._actor._call(self._name, args, kwargs)


class ActorHandle:
    def __init__(self, cls: type, args: tuple, kwargs: dict):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"actor-{cls.__name__}")
        self._thread.start()
        self._instance = asyncio.run_coroutine_threadsafe(self._make(cls, args, kwargs),
                                                          self._loop).result()

    @staticmethod
    async def _make(cls, args, kwargs):
        return cls(*args, **kwargs)

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self, name)

    def _call(self, name: str, args: tuple, kwargs: dict) -> ObjectRef:
        fn = getattr(self._instance, name)
        if inspect.iscoroutinefunction(fn):
            return ObjectRef(asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), self._loop))
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:  # on the actor's thread, in call order
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the caller, as Ray does
                fut.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return ObjectRef(fut)


class _Options:
    def __init__(self, cls: "ActorClass", name: str | None, namespace: str):
        self._cls, self._name, self._namespace = cls, name, namespace

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        handle = ActorHandle(self._cls._cls, args, kwargs)
        if self._name:
            with _lock:
                _named[(self._namespace, self._name)] = handle
        return handle


class ActorClass:
    def __init__(self, cls: type):
        self._cls = cls

    def options(self, name: str | None = None, namespace: str = "default",
                **_: Any) -> _Options:
        return _Options(self, name, namespace)

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        return ActorHandle(self._cls, args, kwargs)


def remote(*args: Any, **kwargs: Any):
    """``@ray.remote`` or ``@ray.remote(num_gpus=1)`` on a class."""
    if len(args) == 1 and not kwargs and inspect.isclass(args[0]):
        return ActorClass(args[0])
    return ActorClass


def init(address: str | None = None, namespace: str = "default", **_: Any) -> None:
    global _started
    with _lock:
        if _started:
            return
        _started = True
    import raon_cluster  # the harness's stand-in for the worker container

    raon_cluster.start()


def get_actor(name: str, namespace: str = "default") -> ActorHandle:
    with _lock:
        handle = _named.get((namespace, name))
    if handle is None:
        raise ValueError(f"Failed to look up actor with name '{name}'")
    return handle


def get(ref: Any, timeout: float | None = None) -> Any:
    if isinstance(ref, list):
        return [get(r, timeout) for r in ref]
    return ref.result(timeout)


def kill(actor: ActorHandle, no_restart: bool = True) -> None:
    actor._loop.call_soon_threadsafe(actor._loop.stop)


def shutdown() -> None:
    pass
