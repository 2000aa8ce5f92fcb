"""The hooks pytest-duplexact offers other plugins and conftest.py files (registered by
plugin.py's ``pytest_addhooks``), the way pytest-benchmark offers
``pytest_benchmark_update_json``. docs/reports.md, "Adding to report.json"."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest


@pytest.hookspec
def pytest_duplexact_report(report, config) -> None:
    """Called once on the controller with the run's typed report (``report.model.Report``)
    just before report.json is written (and stored, and summarised). Add to it by writing to
    ``report.extra``, a dict of JSON values written as report.json's ``extra`` key (absent
    while empty). The report's other fields are frozen: its numbers are the run's. What is not
    strict JSON in ``extra`` is converted (``json_safe``) and a note says so; a hook that raises
    (anything, ``pytest.fail``, ``sys.exit`` and Ctrl-C included) costs its ``extra``, never
    report.json."""


_DEPTH = 64  # deeper than any data a hook means to add; a report put inside itself ends here


def json_safe(value: Any) -> tuple[Any, set[str]]:
    """``value`` (a hook's ``extra``) as strict JSON values, and what had to change: a numpy
    scalar or array becomes its number(s), a set or tuple a list (a set sorted), a key that is
    no string its ``str``, NaN or infinity null, anything else (or anything nested deeper than
    ``_DEPTH``) its ``repr``. report.json then holds what the hook meant, and stays JSON."""
    changed: set[str] = set()

    def walk(v: Any, depth: int) -> Any:
        if depth > _DEPTH:
            changed.add(f"values nested deeper than {_DEPTH} levels as their repr")
            return _short_repr(v)
        if v is None or isinstance(v, (bool, str, int)):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            changed.add("NaN and infinity as null")
            return None
        if hasattr(v, "tolist") and type(v).__module__.split(".")[0] == "numpy":
            changed.add("numpy values as plain numbers and lists")
            return walk(v.tolist(), depth + 1)
        if isinstance(v, Mapping):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    changed.add("keys that are not strings as strings")
                    k = str(k)
                out[k] = walk(x, depth + 1)
            return out
        if isinstance(v, (set, frozenset)):
            changed.add("sets as sorted lists")
            items = [walk(x, depth + 1) for x in v]
            return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
        if isinstance(v, (list, tuple)):
            return [walk(x, depth + 1) for x in v]
        changed.add(f"other values ({type(v).__name__}) as their repr")
        return _short_repr(v)

    return walk(value, 0), changed


def _short_repr(v: Any) -> str:
    try:
        text = repr(v)
    except Exception as e:  # a repr that raises is still not the report's problem
        text = f"<{type(v).__name__}: repr raised {type(e).__name__}>"
    return text if len(text) <= 200 else text[:200] + "..."
