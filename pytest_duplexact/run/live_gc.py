"""The garbage collector's pauses while live sessions stream.

A full collection (generation 2) walks every object the collector tracks, with the GIL held.
After pytest's collection and the SDKs' imports (pydantic's models, the test items) that is
over a hundred thousand objects: 94-311 ms per full collection in the pytest process of
``benchmarks/sessions_per_core.py`` at 128 sessions, a stall of every live session's event
loop that put 45-190 trials over the timing tolerance at once (by ``gc.callbacks``: each burst
of re-runs was such a collection, or the first seconds of the run).

``hold()`` calls ``gc.freeze()`` (constant time): everything tracked when the live run starts
moves to the permanent generation, which no later collection walks, so the collections during
the run scan only what the run itself allocates. ``release()`` (the last holder's) calls
``gc.unfreeze()``: those objects go back to the collector, and any of them that is garbage
(then, or already at the freeze: no collection runs first, it would be one more pause) is
collected by the next full collection, never lost. Nested holders (two prefetchers) count.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0


def hold() -> None:
    """Before the first live session: freeze what the collector tracks now."""
    global _holders
    with _lock:
        _holders += 1
        if _holders == 1:
            gc.freeze()


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
