"""The loop's one send clock: t0 on its grid, one release per instant for every waiter, never
before the instant, and a slot already due is not waited for."""

from __future__ import annotations

import asyncio

import pytest

from pytest_duplexact.pipelines.pacing import GRID, Pacer


@pytest.mark.asyncio
async def test_waiters_on_one_instant_share_it_and_are_never_released_early():
    loop = asyncio.get_running_loop()
    pacer = Pacer.of(loop)
    assert Pacer.of(loop) is pacer
    slot = pacer.start()
    assert slot % GRID == 0 and pacer.time(slot) >= loop.time() - 1e-9
    slot += GRID  # a later grid line: certainly in the future
    a, b = pacer.wait(slot), pacer.wait(slot)
    assert a is not None and b is not None and len(pacer._waiters[slot]) == 2
    await asyncio.gather(a, b)
    assert loop.time() >= pacer.time(slot) - 1e-6
    assert slot not in pacer._waiters
    assert pacer.wait(slot) is None  # due already: the caller goes on at once


@pytest.mark.asyncio
async def test_a_cancelled_waiter_is_dropped_and_the_others_still_released():
    pacer = Pacer.of(asyncio.get_running_loop())
    slot = pacer.start() + GRID
    gone, kept = pacer.wait(slot), pacer.wait(slot)
    gone.cancel()
    pacer.forget(slot, gone)
    assert pacer._waiters[slot] == [kept]
    await kept


@pytest.mark.asyncio
async def test_a_callback_runs_at_its_slot_after_the_futures_and_never_early():
    loop = asyncio.get_running_loop()
    pacer = Pacer.of(loop)
    slot = pacer.start() + GRID
    order: list[str] = []
    fut = pacer.wait(slot)
    fut.add_done_callback(lambda _: order.append("future"))
    done = loop.create_future()

    def call():
        order.append("call")
        assert loop.time() >= pacer.time(slot) - 1e-6
        done.set_result(None)

    pacer.call_at_slot(slot, call)
    assert len(pacer._waiters[slot]) == 2  # one shared timer for both
    await done
    await asyncio.sleep(0)
    # the callback runs in the release itself; the future's callbacks a loop turn later
    assert order == ["call", "future"]


@pytest.mark.asyncio
async def test_a_due_slot_runs_at_the_next_turn_and_a_failing_callback_skips_no_other():
    loop = asyncio.get_running_loop()
    pacer = Pacer.of(loop)
    ran: list[str] = []
    pacer.call_at_slot(pacer.start() - GRID, lambda: ran.append("due"))
    assert ran == []  # not inline: a late session's chunks must not run back to back
    await asyncio.sleep(0)
    assert ran == ["due"]

    errors: list[dict] = []
    loop_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, ctx: errors.append(ctx))
    try:
        slot = pacer.start() + GRID
        done = loop.create_future()
        pacer.call_at_slot(slot, lambda: 1 / 0)
        pacer.call_at_slot(slot, lambda: done.set_result("after"))
        assert await done == "after"
    finally:
        loop.set_exception_handler(loop_handler)
    assert len(errors) == 1 and isinstance(errors[0]["exception"], ZeroDivisionError)


@pytest.mark.asyncio
async def test_a_forgotten_callback_does_not_run():
    loop = asyncio.get_running_loop()
    pacer = Pacer.of(loop)
    slot = pacer.start() + GRID
    ran: list[str] = []

    def gone():
        ran.append("gone")

    pacer.call_at_slot(slot, gone)
    kept = pacer.wait(slot)
    pacer.forget(slot, gone)
    await kept
    assert ran == []
