"""live_pauses: what is alive when the live run starts is frozen out of the collector's walks for
the run (and what an adapter imports on its first session, by ``settle``), and handed back (so
collectable again) when the last holder releases it; the GIL's switch interval is short while
held and restored after."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from types import SimpleNamespace

import pytest

from pytest_duplexact.run import live_pauses
from pytest_duplexact.run.prefetch import Prefetcher


@pytest.fixture
def unfrozen():
    assert not live_pauses.held()
    gc.unfreeze()
    yield
    while live_pauses.held():
        live_pauses.release()
    gc.unfreeze()


def test_hold_freezes_release_hands_back_and_holders_nest(unfrozen):
    class Cycle:
        pass

    live_pauses.hold()
    assert gc.get_freeze_count() > 0
    a = Cycle()
    a.me = a  # garbage made during the run: collected as usual
    del a
    assert gc.collect() >= 1
    live_pauses.hold()  # a second holder
    live_pauses.release()
    assert live_pauses.held() and gc.get_freeze_count() > 0  # the first still holds
    live_pauses.release()
    assert not live_pauses.held() and gc.get_freeze_count() == 0
    live_pauses.release()  # one release too many is harmless
    assert gc.get_freeze_count() == 0


def test_garbage_frozen_at_the_start_is_collected_after_release(unfrozen):
    class Cycle:
        pass

    a = Cycle()
    a.me = a
    alive = weakref.ref(a)
    del a  # already garbage when the run starts: frozen with the rest
    live_pauses.hold()
    gc.collect()
    assert alive() is not None  # no collection walks it during the run
    live_pauses.release()
    gc.collect()
    assert alive() is None


def test_the_prefetcher_holds_from_its_first_trial_to_its_close(unfrozen):
    async def run(instance):
        assert live_pauses.held()
        await asyncio.sleep(0)
        return instance.id

    p = Prefetcher(run, concurrency=2)
    try:
        assert not live_pauses.held()  # nothing live yet: nothing frozen
        p.submit([SimpleNamespace(id="a")])
        assert live_pauses.held() and p.result(SimpleNamespace(id="a")) == "a"
    finally:
        p.close()
    assert not live_pauses.held() and gc.get_freeze_count() == 0


def test_modules_imported_while_held_are_frozen_too_and_only_then(unfrozen):
    live_pauses.hold()
    assert not live_pauses.settle()  # nothing imported since the freeze: no freeze
    mod = type(sys)("duplexact_test_lazy_sdk")  # an SDK module imported on a first session
    mod.table = {"a": [1, 2]}
    sys.modules[mod.__name__] = mod
    try:
        frozen = gc.get_freeze_count()
        assert live_pauses.settle() and gc.get_freeze_count() > frozen
        assert not gc.is_tracked(mod.table) or not any(  # out of every generation's walk
            o is mod.table for o in gc.get_objects())
        assert not live_pauses.settle()  # once per import, not per call
    finally:
        del sys.modules[mod.__name__]
    live_pauses.release()
    assert not live_pauses.settle()  # not held: nothing to do
    assert gc.get_freeze_count() == 0


def test_the_switch_interval_is_short_while_held_and_restored_after(unfrozen):
    before = sys.getswitchinterval()
    live_pauses.hold()
    live_pauses.hold()
    assert sys.getswitchinterval() == min(live_pauses.SWITCH_S, before)
    live_pauses.release()
    assert sys.getswitchinterval() == min(live_pauses.SWITCH_S, before)  # one still holds
    live_pauses.release()
    assert sys.getswitchinterval() == before
