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
