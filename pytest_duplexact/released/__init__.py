"""The released DuplexAct benchmark (Hugging Face dataset ``LincolnD/DuplexAct``) as a data
source: ``--duplexact-data=hf:REPO[@REV]`` or ``hf:/local/folder`` (docs/released-data.md).

The parquet snapshot is converted once into a DuplexAct-format folder (convert.py), cached by
the snapshot's file hashes and the mapping (mapping.toml + the user's file), and then loaded
by the normal loader. ``resolve_data`` is the one entry point the plugin and the CLI use.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ReleasedDataError

HF_PREFIX = "hf:"
__all__ = ["HF_PREFIX", "ReleasedDataError", "is_released_spec", "resolve_data"]


def is_released_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(HF_PREFIX)


def resolve_data(spec: str, mapping: Path | str | None = None,
                 skip_unmappable: bool = False, log=None) -> Path:
    """``hf:REPO[@REV]`` or ``hf:/folder`` -> a converted DuplexAct dataset folder (cached).
    Raises ReleasedDataError (with the grouped unmappable report when the mapping is
    incomplete and ``skip_unmappable`` is False)."""
    from .convert import convert_cached
    from .mapping import load_mapping
    from .snapshot import clean_stale_conversions, resolve_snapshot

    m = load_mapping(mapping)
    clean_stale_conversions()  # what conversions killed midway left
    snap = resolve_snapshot(spec[len(HF_PREFIX):], m, log=log)
    return convert_cached(snap, m, skip_unmappable=skip_unmappable, log=log)
