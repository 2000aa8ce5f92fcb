"""The plugin side of ``--duplexact-data=hf:...``: options -> the converted folder, and what a
run's settings record about it (snapshot, revision, mapping, skipped rows)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ..pytest_plugin import options
from . import ReleasedDataError, resolve_data
from .convert import UNMAPPABLE_FILE


def resolve_for_run(config, data: str) -> tuple[Path, dict]:
    mapping = options.get(config, "data-mapping")
    skip = options.get(config, "skip-unmappable")

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
    return root, describe(root, data)


def describe(root: Path, data: str) -> dict:
    """What a report says about the released data it ran on."""
    header = json.loads((root / "dataset.json").read_text(encoding="utf-8"))["released"]
    rows = json.loads((root / UNMAPPABLE_FILE).read_text(encoding="utf-8"))["unmappable"]
    return {"spec": data, "snapshot": header["snapshot"], "revision": header["revision"],
            "mapping": header["mapping"], "mapping_sha256": header["mapping_sha256"],
            "rows": header["rows"], "instances": header["instances"],
            "source_sample_rates": header["source_sample_rates"],
            "unmappable": len(rows), "unmappable_ids": [r["id"] for r in rows]}
