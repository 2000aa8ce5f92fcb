from pathlib import Path

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.run.selection import (
    Selection,
    SelectionError,
    nothing_matches,
    parse_shard,
    select,
    shard_of,
)
from tests.support.builders import make_instance


def make(action, cond, scenario, k, source="synthesized"):
    return make_instance(None, action, cond, {}, iid=f"{action}-{cond}-{scenario}-{k:02d}",
                         scenario=scenario, source=source, manifest=Path("m.jsonl"), line=1)


@pytest.fixture
def pool():
    out = []
    for c in taxonomy.CONDITIONS:
        for k, sc in enumerate(taxonomy.SCENARIOS * 2):
            out.append(make(c.action, c.id, sc, k, "real" if k % 3 == 0 else "synthesized"))
    return out


def test_filters(pool):
    got = select(pool, Selection(actions=("take_turn",), conditions=("delayed",)))
    assert got and all(i.action == "take_turn" and i.condition == "delayed" for i in got)
    got = select(pool, Selection(conditions=("hold_floor.background_speech",)))
    assert {(i.action, i.condition) for i in got} == {("hold_floor", "background_speech")}
    got = select(pool, Selection(conditions=("background_speech",)))
    assert {i.action for i in got} == {"ignore", "hold_floor"}
    got = select(pool, Selection(scenarios=("casual",), sources=("real",)))
    assert got and all(i.scenario == "casual" and i.source == "real" for i in got)


def test_limit_is_seeded_and_order_independent(pool):
    a = select(pool, Selection(limit=2, seed=7))
    b = select(list(reversed(pool)), Selection(limit=2, seed=7))
    assert [i.id for i in a] == [i.id for i in b]
    assert len(a) == 2 * len(taxonomy.CONDITIONS)
    c = select(pool, Selection(limit=2, seed=8))
    assert [i.id for i in a] != [i.id for i in c]


def test_order_follows_taxonomy(pool):
    got = select(pool, Selection())
    keys = [f"{i.action}.{i.condition}" for i in got]
    order = [c.key for c in taxonomy.CONDITIONS]
    assert sorted(keys, key=order.index) == keys


def test_shards_partition(pool):
    shards = [select(pool, Selection(shard=(k, 3))) for k in (1, 2, 3)]
    ids = [i.id for s in shards for i in s]
    assert sorted(ids) == sorted(i.id for i in pool) and len(set(ids)) == len(ids)
    assert shard_of("x", 5) == shard_of("x", 5)


@pytest.mark.parametrize("sel,msg", [
    (Selection(actions=("talk",)), "unknown action"),
    (Selection(conditions=("soon",)), "unknown condition"),
    (Selection(scenarios=("party",)), "unknown scenario"),
    (Selection(sources=("fake",)), "unknown source"),
    (Selection(limit=0), "limit"),
    (Selection(shard=(4, 3)), "shard"),
])
def test_bad_selection(pool, sel, msg):
    with pytest.raises(SelectionError, match=msg):
        select(pool, sel)


@pytest.mark.parametrize("sel,hint", [
    (Selection(actions=("take-turn",)), "unknown action 'take-turn' (did you mean 'take_turn'?)"),
    (Selection(conditions=("delayd",)), "(did you mean 'delayed'?)"),
    (Selection(scenarios=("meting",)), "(did you mean 'meeting'?)"),
])
def test_a_misspelt_name_gets_the_closest_known_one(pool, sel, hint):
    with pytest.raises(SelectionError) as err:
        select(pool, sel)
    assert hint in str(err.value)


def test_parse_shard():
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) is None
    with pytest.raises(SelectionError):
        parse_shard("2-4")


def test_a_selection_that_keeps_nothing_says_which_filter(pool):
    n = len(pool)
    # a filter that matches nothing alone is named, with what the data has
    got = nothing_matches(pool, Selection(corpora=("Candor",)))
    assert got == (f"--duplexact-corpus=Candor matches none of the data's {n} instances (its "
                   "instances name no corpus); widen the selection")
    only_casual = [i for i in pool if i.scenario == "casual"]
    got = nothing_matches(only_casual, Selection(actions=("wait",), scenarios=("meeting",)))
    assert got == (f"--duplexact-scenario=meeting matches none of the data's "
                   f"{len(only_casual)} instances (it has casual); widen the selection")
    # filters that each match something, but not together
    real_wait = [i for i in pool if i.action != "wait" or i.source == "synthesized"]
    got = nothing_matches(real_wait, Selection(actions=("wait",), sources=("real",)))
    assert got == (f"--duplexact-action=wait and --duplexact-source=real keep none of the "
                   f"data's {len(real_wait)} instances together; widen the selection")
    # never for a selection that keeps something, an empty dataset, or an empty shard
    assert nothing_matches(pool, Selection(actions=("wait",))) is None
    assert nothing_matches([], Selection(corpora=("Candor",))) is None
    tiny = pool[:1]
    empty_shard = next(k for k in (1, 2) if not select(tiny, Selection(shard=(k, 2))))
    assert nothing_matches(tiny, Selection(shard=(empty_shard, 2))) is None
