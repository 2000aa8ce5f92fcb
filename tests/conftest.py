"""The tests' one import style: ``tests`` and every folder below it are packages, and a test
imports a helper by its absolute name, ``from tests.<folder>.<module> import ...`` (shared
builders: ``tests.support.builders``). pytest puts the checkout on sys.path (the top-level
conftest.py sits there), so plain ``pytest`` and ``python -m pytest`` import each module
under that one name. Folders mirror the package floors (docs/architecture.md); the fakes
under tests/fakes also run as scripts, so they import their siblings by bare name.

A folder's fixtures live in its conftest.py, its helpers in a module beside its tests."""

from __future__ import annotations

import itertools

import pytest

# Helper modules hold the assertions many tests share: give them pytest's messages. (Test
# modules and conftests are rewritten anyway; these are imported first from here on.)
pytest.register_assert_rewrite(
    "tests.support", "tests.support.realtime", "tests.pipelines.helpers",
    "tests.rules.helpers", "tests.report.helpers", "tests.judges.judgekit",
    "tests.bridges.support", "tests.bridges.model_support", "tests.released.snapshot_builder")


def pytest_collection_modifyitems(config, items):
    """Longest first, on every worker: the Slurm tests (minutes of waiting on the scheduler,
    little CPU), then the modules holding a test marked ``slow`` (end-to-end runs at 1x real
    time), each worker's share at the head of its queue, so none of them is the run's tail."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = head_start(items, workers, lambda item: item.get_closest_marker("slow") is not None)


def head_start(items: list, workers: int, slow) -> list:
    """``items`` reordered so that the long modules open the workers' first shares.

    ``--dist worksteal`` hands worker j the j-th of ``workers`` contiguous shares of the
    collection (its first ``len // workers`` items, then a third of the rest, ...) and later
    moves the *tail* of a busy worker's queue to an idle one. A module is long when it is a
    Slurm one or holds a ``slow`` item; whole modules (their module-scoped fixtures are set up
    once) are dealt round robin to the shares' heads, the Slurm ones first so that one worker
    does not get all of them, and the rest fill each share in collection order. Every worker
    collects the same order, as xdist requires."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    long = [m for m, its in modules.items() if m.startswith("tests/cluster/") or any(map(slow, its))]
    long.sort(key=lambda m: 0 if m.startswith("tests/cluster/") else 1)
    rest = [i for m, its in modules.items() if m not in long for i in its]
    if workers <= 1:
        return [i for m in long for i in modules[m]] + rest
    sizes, left = [], len(items)
    for j in range(workers):  # the scheduler's own split (worksteal.check_schedule)
        sizes.append(left // (workers - j))
        left -= sizes[-1]
    heads: list[list] = [[] for _ in range(workers)]
    for k, m in enumerate(long):
        heads[k % workers] += modules[m]
    out, it = [], iter(rest)
    for head, size in zip(heads, sizes):
        # islice: when the long modules outweigh the shares (a small selection), the rest
        # runs out before the last share is filled
        out += head + list(itertools.islice(it, max(0, size - len(head))))
    return out + list(it)
