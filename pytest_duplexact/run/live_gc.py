"""The garbage collector's pauses while live sessions stream.

A full collection (generation 2) walks every object the collector tracks, with the GIL held.
After pytest's collection and the SDKs' imports (pydantic's models, the test items) that is
over a hundred thousand objects: 94-311 ms per full collection in the pytest process of
``benchmarks/sessions_per_core.py`` at 128 sessions, a stall of every live session's event
loop that put 45-190 trials over the timing tolerance at once (by ``gc.callbacks``: each burst
of re-runs was such a collection, or the first seconds of the run).

``hold()`` calls ``gc.freeze()`` (constant time): everything tracked when the live run starts
moves to the permanent generation, which no later collection walks, so the collections during
the run scan only what the run itself allocates. An adapter imports part of its SDK on its
first session (gpt-realtime: 279 modules, pydantic's models among them), after that freeze;
``settle()``, asked every control step while held, freezes once more when ``sys.modules`` has
grown since the last freeze. Objects alive then are frozen with them: any of those that later
becomes cyclic garbage waits for ``release()``, so this happens only when modules were imported
(the first seconds of a run), not on a timer. ``release()`` (the last holder's) calls
``gc.unfreeze()``: those objects go back to the collector, and any of them that is garbage
(then, or already at the freeze: no collection runs first, it would be one more pause) is
collected by the next full collection, never lost. Nested holders (two prefetchers) count.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_holders = 0
_modules = 0  # len(sys.modules) at the last freeze


def hold() -> None:
    """Before the first live session: freeze what the collector tracks now."""
    global _holders, _modules
    with _lock:
        _holders += 1
        if _holders == 1:
            gc.freeze()
            _modules = len(sys.modules)


def settle() -> bool:
    """While held: freeze again if modules were imported since the last freeze (constant
    time; True if it did)."""
    global _modules
    with _lock:
        if _holders == 0 or len(sys.modules) <= _modules:
            return False
        gc.freeze()
        _modules = len(sys.modules)
        return True


def release() -> None:
    """After the last live session: the frozen objects go back to the collector."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            gc.unfreeze()


def held() -> bool:
    return _holders > 0
