"""opening(): a loop's first connection alone, then at most AT_ONCE at a time
(pipelines/opening.py). Driven by events, not by time: nothing here depends on the machine."""

from __future__ import annotations

import asyncio

import pytest

from pytest_duplexact.models.streaming_contract import ADMISSION, Admission
from pytest_duplexact.pipelines.opening import AT_ONCE, opening


class Connects:
    """Connections that each hold their lane until released, recording who was inside."""

    def __init__(self) -> None:
        self.inside: set[int] = set()
        self.most = 0
        self.entered: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    async def connect(self, k: int, fail: bool = False) -> int:
        self.release[k] = asyncio.Event()
        async with opening():
            self.inside.add(k)
            self.entered.append(k)
            self.most = max(self.most, len(self.inside))
            try:
                await self.release[k].wait()
                if fail:
                    raise ConnectionRefusedError("no")
            finally:
                self.inside.discard(k)
        return k


async def settle() -> None:
    for _ in range(20):  # let every task that can run, run
        await asyncio.sleep(0)


def test_the_first_connects_alone_then_at_most_at_once():
    async def main():
        c = Connects()
        tasks = [asyncio.create_task(c.connect(k)) for k in range(3 * AT_ONCE)]
        await settle()
        assert c.inside == {0}  # the loop's first, alone, however many started with it
        c.release[0].set()
        await settle()
        assert len(c.inside) == AT_ONCE and 0 not in c.inside
        while len(c.entered) < len(tasks) or c.inside:
            for k in list(c.inside):
                c.release[k].set()
            await settle()
        assert sorted(await asyncio.gather(*tasks)) == list(range(3 * AT_ONCE))
        assert c.most == AT_ONCE

    asyncio.run(main())


def test_a_first_that_fails_or_is_cancelled_lets_the_others_connect():
    async def main(end_first):
        c = Connects()
        first = asyncio.create_task(c.connect(0, fail=True))
        await settle()
        rest = [asyncio.create_task(c.connect(k)) for k in (1, 2)]
        await settle()
        assert c.inside == {0}
        end_first(first, c)
        await settle()
        assert c.inside == {1, 2}
        for k in (1, 2):
            c.release[k].set()
        assert await asyncio.gather(*rest) == [1, 2]
        return first

    failed = asyncio.run(main(lambda t, c: c.release[0].set()))
    assert isinstance(failed.exception(), ConnectionRefusedError)
    cancelled = asyncio.run(main(lambda t, c: t.cancel()))
    assert cancelled.cancelled()


def test_a_cancelled_waiter_leaves_the_first_and_its_lane_alone():
    async def main():
        c = Connects()
        first = asyncio.create_task(c.connect(0))
        await settle()
        waiter = asyncio.create_task(c.connect(1))
        await settle()
        waiter.cancel()
        await settle()
        assert waiter.cancelled() and not first.done() and c.inside == {0}
        c.release[0].set()
        assert await first == 0
        # the cancelled waiter took no lane: AT_ONCE still connect together
        more = [asyncio.create_task(c.connect(k)) for k in range(2, 2 + AT_ONCE)]
        await settle()
        assert len(c.inside) == AT_ONCE
        for k in range(2, 2 + AT_ONCE):
            c.release[k].set()
        await asyncio.gather(*more)

    asyncio.run(main())


def test_each_loop_has_its_own_first():
    def one_loop():
        async def main():
            c = Connects()
            tasks = [asyncio.create_task(c.connect(k)) for k in range(3)]
            await settle()
            seen = set(c.inside)
            for k in range(3):
                c.release[k].set()
            await asyncio.gather(*tasks)
            return seen

        return asyncio.run(main())

    assert one_loop() == {0} and one_loop() == {0}


@pytest.mark.parametrize("wait_for", ["the first", "a lane"])
def test_the_wait_is_an_admission_not_model_silence(wait_for):
    async def main():
        c = Connects()
        first = asyncio.create_task(c.connect(0))
        await settle()
        if wait_for == "a lane":
            c.release[0].set()
            await first
            for k in range(1, 1 + AT_ONCE):
                asyncio.create_task(c.connect(k))
            await settle()
        record = Admission()

        async def watched():
            ADMISSION.set(record)  # what the watchdog sets for a trial's context
            return await c.connect(99)

        waiter = asyncio.create_task(watched())
        await settle()
        assert record.waiting == 1 and 99 not in c.inside  # the watchdog's "not silence"
        for k in list(c.release):
            if k != 99:
                c.release[k].set()
        await settle()
        assert record.waiting == 0 and 99 in c.inside
        c.release[99].set()
        await waiter
        await asyncio.gather(*asyncio.all_tasks() - {asyncio.current_task()})

    asyncio.run(main())
