"""The paper's published numbers for its 14 models (Tables 4, 15 and 16), bundled as
``paper_results.json`` and shown beside a run in the Markdown and HTML views. Plain data
under both report/ and released/, so either may read it without importing the other.

The JSON keeps the numbers exactly as printed (percent, seconds, ``null`` for "n/a"); the
accessors here return rates as fractions, like the report. Those numbers were measured on the
full released benchmark (4,691 instances): beside a run on other data (the bundled fixtures, a
subset) they are context, not a comparison.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from statistics import mean

from ..data import taxonomy

RESOURCE = "paper_results.json"
DIRECT_ACTIONS = tuple(a for a in taxonomy.ACTIONS
                       if taxonomy.conditions_of(a)[0].pipeline is taxonomy.Pipeline.DIRECT)


class PaperDataError(ValueError):
    pass


@dataclass(frozen=True)
class PaperModel:
    name: str
    short: str  # the paper's figure label
    access: str  # "open" | "closed"
    simulator: bool  # evaluated on the Simulator Replay actions (10 of the 14)


@dataclass(frozen=True)
class PaperResults:
    note: str
    instances: int
    models: tuple[PaperModel, ...]
    table4: dict  # model -> action -> {"I", "S"[, "T"]}, percent / seconds as printed
    table15: dict  # model -> "action.condition" -> {"median", "iqr", "n"} | None
    table16: dict  # model -> "action.condition" -> {"I", "S", "n_S"}

    def action(self, model: str, action: str) -> dict | None:
        """Table 4's cell as fractions: ``{"I", "S", "T"}`` (T only for timed actions), values
        ``None`` where the paper prints n/a; ``None`` when the model was not evaluated."""
        cell = self.table4.get(model, {}).get(action)
        if cell is None:
            return None
        return {"I": _frac(cell["I"]), "S": _frac(cell["S"]), "T": cell.get("T")}

    def condition(self, model: str, key: str) -> dict | None:
        """Table 16's cell for ``action.condition`` as ``{"I", "S", "n_S"}`` (fractions)."""
        cell = self.table16.get(model, {}).get(key)
        if cell is None:
            return None
        return {"I": _frac(cell["I"]), "S": _frac(cell["S"]), "n_S": cell["n_S"]}

    def timing(self, model: str, key: str) -> dict | None:
        """Table 15's cell ``{"median", "iqr", "n"}`` in seconds, or ``None``."""
        return self.table15.get(model, {}).get(key)

    def condition_mean(self, key: str) -> tuple[float | None, float | None]:
        """(mean I, mean S) over the models with a value: the paper's Figure 3 bars."""
        cells = [self.table16[m.name][key] for m in self.models if key in self.table16[m.name]]
        i = [c["I"] for c in cells if c["I"] is not None]
        s = [c["S"] for c in cells if c["S"] is not None]
        return (_frac(mean(i)) if i else None, _frac(mean(s)) if s else None)


def _frac(v):
    return None if v is None else v / 100.0


def _fail(field: str, message: str):
    raise PaperDataError(f"{RESOURCE}: {field}: {message}")


def _validate(d: dict) -> None:
    keys = {c.key for c in taxonomy.CONDITIONS}
    timed = {c.key for c in taxonomy.CONDITIONS if c.action in taxonomy.TIMING_DIAGNOSTIC}
    direct = {c.key for c in taxonomy.CONDITIONS if c.action in DIRECT_ACTIONS}
    for m in d["models"]:
        name = m["name"]
        want_actions = set(taxonomy.ACTIONS) if m["simulator"] else set(DIRECT_ACTIONS)
        got = set(d["table4"].get(name, {}))
        if got != want_actions:
            _fail(f"table4.{name}", f"actions {sorted(got)}, expected {sorted(want_actions)}")
        for action, cell in d["table4"][name].items():
            want = {"I", "S", "T"} if action in taxonomy.TIMING_DIAGNOSTIC else {"I", "S"}
            if set(cell) != want:
                _fail(f"table4.{name}.{action}", f"keys {sorted(cell)}, expected {sorted(want)}")
        want_conds = keys if m["simulator"] else direct
        got = set(d["table16"].get(name, {}))
        if got != want_conds:
            _fail(f"table16.{name}", f"{len(got)} conditions, expected {len(want_conds)}: "
                  f"missing {sorted(want_conds - got)}, unknown {sorted(got - want_conds)}")
        for key, cell in d["table16"][name].items():
            if (cell["S"] is None) != (cell["n_S"] == 0):
                _fail(f"table16.{name}.{key}", "S is n/a exactly when n_S is 0")
        if m["simulator"] and set(d["table15"].get(name, {})) != timed:
            _fail(f"table15.{name}", f"expected the {len(timed)} timed conditions")
    extra = set(d["table4"]) - {m["name"] for m in d["models"]}
    if extra:
        _fail("table4", f"models not listed in 'models': {sorted(extra)}")


@lru_cache(maxsize=1)
def load() -> PaperResults:
    """The bundled numbers, validated against the taxonomy (cached)."""
    d = json.loads(files(__package__).joinpath(RESOURCE).read_text(encoding="utf-8"))
    _validate(d)
    return PaperResults(
        note=d["note"], instances=int(d["benchmark_instances"]),
        models=tuple(PaperModel(m["name"], m["short"], m["access"], bool(m["simulator"]))
                     for m in d["models"]),
        table4=d["table4"], table15=d["table15"], table16=d["table16"])
