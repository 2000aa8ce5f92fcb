"""The suite's own order under ``-n 4 --dist worksteal`` (tests/conftest.py ``head_start``):
the long modules open the workers' first shares, whole, and nothing is lost or repeated."""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import head_start


@dataclass(frozen=True)
class Item:
    nodeid: str
    slow: bool = False


def shares(items: list, workers: int) -> list[list]:
    """What worksteal's first distribution hands each worker (its check_schedule)."""
    out, left = [], list(items)
    for j in range(workers):
        n = len(left) // (workers - j)
        out.append(left[:n])
        left = left[n:]
    return out


def collection() -> list[Item]:
    items = [Item(f"tests/a/test_{m}.py::t{k}", slow=(m % 5 == 0 and k == 2))
             for m in range(40) for k in range(6)]
    return items[:30] + [Item("tests/cluster/test_slurm.py::t0"),
                         Item("tests/cluster/test_slurm.py::t1")] + items[30:]


def test_every_item_once_and_each_long_module_whole_at_a_shares_head():
    items = collection()
    for workers in (1, 2, 4):
        out = head_start(items, workers, lambda i: i.slow)
        assert sorted(out, key=str) == sorted(items, key=str)
        long = {i.nodeid.split("::")[0] for i in items if i.slow} | {"tests/cluster/test_slurm.py"}
        for share in shares(out, workers):
            modules = [i.nodeid.split("::")[0] for i in share]
            head = [m for m in dict.fromkeys(modules) if m in long]
            # the share opens with its long modules, each contiguous, then only short ones
            assert modules[:len([m for m in modules if m in long])] == \
                [m for m in modules if m in long]
            assert all(modules.count(m) == 6 or m.startswith("tests/cluster") for m in head)
        assert out[0].nodeid.startswith("tests/cluster/")  # the longest waits start first


def test_the_long_modules_are_dealt_across_the_workers():
    out = head_start(collection(), 4, lambda i: i.slow)
    per_share = [len({i.nodeid.split("::")[0] for i in s if i.slow or "cluster" in i.nodeid})
                 for s in shares(out, 4)]
    assert max(per_share) - min(per_share) <= 1, per_share


def test_a_small_selection_of_mostly_long_modules_keeps_every_item():
    """Long modules heavier than the shares (``pytest -n 3`` on a few slow files) leave the
    rest too short to fill the last share: every item still comes out once."""
    items = [Item(f"tests/a/test_{m}.py::t{k}", slow=(k == 0)) for m in range(3)
             for k in range(5)] + [Item("tests/a/test_short.py::t0")]
    for workers in (2, 3, 4):
        out = head_start(items, workers, lambda i: i.slow)
        assert sorted(out, key=str) == sorted(items, key=str)
