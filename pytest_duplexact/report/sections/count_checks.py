"""The counts of a stored report's summary, checked before anything computes with them: a
baseline (or any report read back) whose counts are not whole numbers, are negative, or have
more successes than trials is refused by field, not a crash at the end of a run."""

from __future__ import annotations

from ...data import taxonomy

_RATE_FIELDS = tuple(f for m in taxonomy.RATE_KINDS for f in (f"n_{m}", f"{m}_success"))


def count_problems(actions: dict):
    """(field, what is wrong) for every count ``compare`` reads: each action an object with
    ``counts`` and ``conditions``, every n and success a whole number, 0 <= success <= n. A
    baseline that passes is compared without surprises at the end of the run."""
    for action, a in actions.items():
        where = f"summary.actions.{action}"
        if not isinstance(a, dict):
            yield where, f"is {a!r}, not an object with 'counts' and 'conditions'"
            continue
        if not isinstance(a.get("conditions"), dict):
            yield f"{where}.conditions", f"is {a.get('conditions')!r}, not an object"
            continue
        groups = [(f"{where}.counts", a.get("counts"))]
        groups += [(f"{where}.conditions.{c}", v) for c, v in a["conditions"].items()]
        for field, counts in groups:
            if not isinstance(counts, dict):
                yield field, f"is {counts!r}, not an object of counts"
                continue
            for key in _RATE_FIELDS:
                v = counts.get(key)
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    yield f"{field}.{key}", f"is {v!r}, not a whole number >= 0"
            metrics = [m for m in taxonomy.RATE_KINDS
                       if all(isinstance(counts.get(k), int) for k in (f"n_{m}", f"{m}_success"))]
            for m in metrics:
                if counts[f"{m}_success"] > counts[f"n_{m}"]:
                    yield (f"{field}.{m}_success", f"is {counts[f'{m}_success']}, more than "
                           f"n_{m} = {counts[f'n_{m}']}")
