"""Which instances a run covers: filters, seeded per-condition sampling, shards. Pure."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from ..data import taxonomy
from ..data.annotations import Instance
from ..data.suggest import did_you_mean


class SelectionError(ValueError):
    pass


@dataclass(frozen=True)
class Selection:
    actions: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()  # "delayed" or "take_turn.delayed"
    scenarios: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    corpora: tuple[str, ...] = ()
    limit: int | None = None
    seed: int = 0
    shard: tuple[int, int] | None = None  # (k, n), 1-based

    def validate(self) -> None:
        def known_names(kind: str, names: tuple[str, ...], known) -> None:
            for name in names:
                if name not in known:
                    raise SelectionError(f"unknown {kind} {name!r}{did_you_mean(name, known)}; "
                                         f"known: {', '.join(known)}")

        known_names("action", self.actions, taxonomy.ACTIONS)
        plain = list(dict.fromkeys(c.id for c in taxonomy.CONDITIONS))
        ids = set(plain) | set(taxonomy.CONDITIONS_BY_KEY)
        for c in self.conditions:
            if c not in ids:
                raise SelectionError(
                    f"unknown condition {c!r}{did_you_mean(c, sorted(ids))}"
                    f"; known: {', '.join(plain)} (or action.condition, e.g. take_turn.delayed)")
        known_names("scenario", self.scenarios, taxonomy.SCENARIOS)
        known_names("source", self.sources, taxonomy.SOURCES)
        known_names("corpus", self.corpora, taxonomy.CORPORA)
        if self.limit is not None and self.limit < 1:
            raise SelectionError("the per-condition limit must be >= 1")
        if self.shard is not None:
            k, n = self.shard
            if not (n >= 1 and 1 <= k <= n):
                raise SelectionError(f"shard must be K/N with 1 <= K <= N, got {k}/{n}")

    def keeps(self, inst: Instance) -> bool:
        if self.actions and inst.action not in self.actions:
            return False
        if self.conditions and inst.condition not in self.conditions \
                and f"{inst.action}.{inst.condition}" not in self.conditions:
            return False
        if self.scenarios and inst.scenario not in self.scenarios:
            return False
        if self.sources and inst.source not in self.sources:
            return False
        if self.corpora and inst.corpus not in self.corpora:
            return False
        return True


def parse_shard(text: str | None, env=None) -> tuple[int, int] | None:
    """``K/N``, or ``auto`` / ``auto/N`` read from the job-array environment (shards.py)."""
    if not text:
        return None
    if text.strip().startswith("auto"):
        from .shards import ShardEnvError, from_environment

        try:
            return from_environment(text.strip(), env)
        except ShardEnvError as e:
            raise SelectionError(str(e)) from None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SelectionError(f"shard must look like K/N (e.g. 2/4), got {text!r}") from None
    return k, n


def shard_of(instance_id: str, n: int) -> int:
    """1-based shard of an instance: stable across machines, Python versions and orderings."""
    h = int.from_bytes(hashlib.sha256(instance_id.encode()).digest()[:8], "big")
    return h % n + 1


def nothing_matches(instances, sel: Selection) -> str | None:
    """Why the selection's filters keep none of a non-empty dataset's instances, or None: the
    filters that match nothing even alone (with what the data holds), else the ones that
    match nothing together. A shard left empty is not this: a small dataset split in many
    shards leaves some empty, and an array job's task must not fail."""
    instances = list(instances)
    if not instances or any(sel.keeps(i) for i in instances):
        return None
    fields = {"action": "actions", "condition": "conditions", "scenario": "scenarios",
              "source": "sources", "corpus": "corpora"}
    given = {flag: getattr(sel, attr) for flag, attr in fields.items() if getattr(sel, attr)}
    flags = {flag: f"--duplexact-{flag}={','.join(names)}" for flag, names in given.items()}
    alone = {flag: Selection(**{fields[flag]: names}) for flag, names in given.items()}
    dead = [flag for flag, one in alone.items() if not any(one.keeps(i) for i in instances)]
    if not dead:
        return (f"{' and '.join(flags.values())} keep none of the data's {len(instances)} "
                "instances together; widen the selection")
    said = []
    for flag in dead:
        held = sorted({str(v) for v in (getattr(i, flag) for i in instances) if v})
        said.append(f"{flags[flag]} matches none of the data's {len(instances)} instances ("
                    + (f"it has {', '.join(held)}" if held else f"its instances name no {flag}")
                    + ")")
    return "; ".join(said) + "; widen the selection"


def select(instances, sel: Selection) -> list[Instance]:
    """Filter, sample (per condition, seeded, independent of input order), shard; the result
    is in taxonomy order, then by instance id."""
    sel.validate()
    order = {c.key: k for k, c in enumerate(taxonomy.CONDITIONS)}
    kept = sorted((i for i in instances if sel.keeps(i)),
                  key=lambda i: (order[f"{i.action}.{i.condition}"], i.id))
    if sel.limit is not None:
        by_cond: dict[str, list[Instance]] = {}
        for i in kept:
            by_cond.setdefault(f"{i.action}.{i.condition}", []).append(i)
        kept = []
        for key, group in by_cond.items():
            if len(group) > sel.limit:
                rng = random.Random(f"{sel.seed}:{key}")
                chosen = set(x.id for x in rng.sample(group, sel.limit))
                group = [x for x in group if x.id in chosen]
            kept.extend(group)
    if sel.shard is not None:
        k, n = sel.shard
        kept = [i for i in kept if shard_of(i.id, n) == k]
    return kept
