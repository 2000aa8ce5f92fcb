"""The plugin side of ``--duplexact-data=hf:...``: options -> the converted folder, and what a
run's settings record about it (snapshot, revision, mapping, skipped rows)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ..data import taxonomy
from ..released import resolve_data
from ..released.convert import UNMAPPABLE_FILE, describe_absent
from ..released.errors import ReleasedDataError
from .config import RunConfig


def resolve_for_run(config, run: RunConfig, data: str) -> tuple[Path, dict]:
    mapping, skip = run.data_mapping, run.skip_unmappable

    def log(msg: str) -> None:
        """Progress (downloading, converting): this runs in pytest_configure, before the
        terminal reporter exists, so straight to stderr until it does."""
        if hasattr(config, "workerinput"):
            return
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(msg)
        else:
            print(msg, file=sys.stderr, flush=True)

    try:
        root = resolve_data(data, Path(mapping) if mapping else None, skip, log=log)
    except ReleasedDataError as e:
        raise pytest.UsageError(f"--duplexact-data={data}: refusing to start: {e}") from None
    released = describe(root, data)
    _refuse_absent_actions(run, data, released["absent_configs"])
    return root, released


def _selected_actions(run: RunConfig) -> set[str]:
    actions = set(run.selection.actions) or set(taxonomy.ACTIONS)
    conditions = set(run.selection.conditions)
    if conditions:
        actions &= {c.action for c in taxonomy.CONDITIONS
                    if c.id in conditions or f"{c.action}.{c.id}" in conditions}
    return actions


def _refuse_absent_actions(run: RunConfig, data: str, absent: dict[str, str]) -> None:
    """A snapshot without some configs' parquet (a renamed folder, a partial copy) would run
    the other actions under a report that reads as the whole benchmark: refused, as
    unmappable rows are, unless the selection leaves those actions out."""
    wanted = _selected_actions(run)
    missing = {c: a for c, a in absent.items() if a in wanted}
    if not missing:
        return
    have = [a for a in taxonomy.ACTIONS if a not in absent.values()]
    raise pytest.UsageError(
        f"--duplexact-data={data}: refusing to start: {describe_absent(missing)}, so the run "
        f"would cover {len(have)} of the {len(taxonomy.ACTIONS)} actions. Complete the "
        "snapshot or the mapping's [source].files / [configs] (`duplexact inspect` lists what "
        f"the snapshot holds), or run the actions it has: --duplexact-action={','.join(have)}")


def describe(root: Path, data: str) -> dict:
    """What a report says about the released data it ran on."""
    header = json.loads((root / "dataset.json").read_text(encoding="utf-8"))["released"]
    rows = json.loads((root / UNMAPPABLE_FILE).read_text(encoding="utf-8"))["unmappable"]
    return {"spec": data, "snapshot": header["snapshot"], "revision": header["revision"],
            "mapping": header["mapping"], "mapping_sha256": header["mapping_sha256"],
            "rows": header["rows"], "instances": header["instances"],
            "source_sample_rates": header["source_sample_rates"],
            "unmappable": len(rows), "unmappable_ids": [r["id"] for r in rows],
            "absent_configs": header.get("absent_configs", {})}
