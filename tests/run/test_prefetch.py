import asyncio
import threading
from types import SimpleNamespace

import pytest

from pytest_duplexact.run.prefetch import Prefetcher


def inst(k):
    return SimpleNamespace(id=f"i{k}")


def test_bounded_concurrency_and_results_by_instance():
    lock, live, peak = threading.Lock(), [0], [0]

    async def run(instance):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        await asyncio.sleep(0.05)
        with lock:
            live[0] -= 1
        return f"rec-{instance.id}"

    p = Prefetcher(run, concurrency=3)
    try:
        items = [inst(k) for k in range(9)]
        p.submit(items)
        assert [p.result(i) for i in items] == [f"rec-i{k}" for k in range(9)]
        assert peak[0] == 3
    finally:
        p.close()


def test_failure_is_that_instance_only():
    async def run(instance):
        if instance.id == "i1":
            raise RuntimeError("session dropped")
        return instance.id

    p = Prefetcher(run, concurrency=2)
    try:
        a, b, c = inst(0), inst(1), inst(2)
        p.submit([a, b, c])
        assert p.result(a) == "i0"
        with pytest.raises(RuntimeError, match="session dropped"):
            p.result(b)
        assert p.result(c) == "i2"
        assert p.result(inst(5)) == "i5"  # not prefetched: started on demand
    finally:
        p.close()
