"""live_gc: what is alive when the live run starts is frozen out of the collector's walks for
the run (and what an adapter imports on its first session, by ``settle``), and handed back (so
collectable again) when the last holder releases it."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from types import SimpleNamespace

import pytest

from pytest_duplexact.run import live_gc
from pytest_duplexact.run.prefetch import Prefetcher


@pytest.fixture
def unfrozen():
    assert not live_gc.held()
    gc.unfreeze()
    yield
    while live_gc.held():
        live_gc.release()
    gc.unfreeze()


def test_hold_freezes_release_hands_back_and_holders_nest(unfrozen):
    class Cycle:
        pass

    live_gc.hold()
    assert gc.get_freeze_count() > 0
    a = Cycle()
    a.me = a  # garbage made during the run: collected as usual
    del a
    assert gc.collect() >= 1
    live_gc.hold()  # a second holder
    live_gc.release()
    assert live_gc.held() and gc.get_freeze_count() > 0  # the first still holds
    live_gc.release()
    assert not live_gc.held() and gc.get_freeze_count() == 0
    live_gc.release()  # one release too many is harmless
    assert gc.get_freeze_count() == 0


def test_garbage_frozen_at_the_start_is_collected_after_release(unfrozen):
    class Cycle:
        pass

    a = Cycle()
    a.me = a
    alive = weakref.ref(a)
    del a  # already garbage when the run starts: frozen with the rest
    live_gc.hold()
    gc.collect()
    assert alive() is not None  # no collection walks it during the run
    live_gc.release()
    gc.collect()
    assert alive() is None


def test_the_prefetcher_holds_from_its_first_trial_to_its_close(unfrozen):
    async def run(instance):
        assert live_gc.held()
        await asyncio.sleep(0)
        return instance.id

    p = Prefetcher(run, concurrency=2)
    try:
        assert not live_gc.held()  # nothing live yet: nothing frozen
        p.submit([SimpleNamespace(id="a")])
        assert live_gc.held() and p.result(SimpleNamespace(id="a")) == "a"
    finally:
        p.close()
    assert not live_gc.held() and gc.get_freeze_count() == 0


def test_modules_imported_while_held_are_frozen_too_and_only_then(unfrozen):
    live_gc.hold()
    assert not live_gc.settle()  # nothing imported since the freeze: no freeze
    mod = type(sys)("duplexact_test_lazy_sdk")  # an SDK module imported on a first session
    mod.table = {"a": [1, 2]}
    sys.modules[mod.__name__] = mod
    try:
        frozen = gc.get_freeze_count()
        assert live_gc.settle() and gc.get_freeze_count() > frozen
        assert gc.is_tracked(mod.table)  # out of every generation's walk, as frozen:
        assert not any(o is mod.table for o in gc.get_objects())
        assert not live_gc.settle()  # once per import, not per call
    finally:
        del sys.modules[mod.__name__]
    live_gc.release()
    assert not live_gc.settle()  # not held: nothing to do
    assert gc.get_freeze_count() == 0

