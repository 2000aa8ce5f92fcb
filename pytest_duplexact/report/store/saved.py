"""Stored runs, as pytest-benchmark users know them (``--benchmark-autosave`` /
``--benchmark-compare``): ``--duplexact-autosave`` keeps every run's report in a store folder
(default ``.duplexact/`` where pytest was started), numbered ``0001_<model>_<time>.json``;
``--duplexact-compare[=ID|latest]`` makes a stored report the run's baseline, gated with the
significance-aware comparison of report/sections/baseline.py.
"""

from __future__ import annotations

import json
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_STORE = ".duplexact"
LOCK_FILE = ".lock"
LOCK_DEADLINE_S = 30.0
_NAME = re.compile(r"^(\d{4,})_.*\.json$")


class StoreError(ValueError):
    pass


def slug(text: str) -> str:
    """A name as a file name's part (the store's entries, the default run directory)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "model"


def entries(store: Path) -> list[tuple[int, Path]]:
    """Stored reports, oldest first."""
    if not store.is_dir():
        return []
    found = [(int(m[1]), p) for p in store.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found)


def store_problem(store: Path, start: Path | None = None,
                  flag: str = "--duplexact-storage") -> str | None:
    """Why ``store`` cannot keep runs, said before a run rather than as a warning after it;
    None when it can, as far as can be told before writing. The first file a save makes is
    the store's lock, so this is that file's ``blocking_parent``: the store, or the nearest
    folder above it that exists, is a file, a link to nothing or not writable. Paths under
    ``start`` (the invocation folder) are shown relative to it, as the user typed them."""
    from ...data.suggest import blocking_parent

    why = blocking_parent(store / LOCK_FILE, start)
    if why is None:
        return None
    try:
        shown = store.relative_to(start) if start is not None else store
    except ValueError:
        shown = store
    return f"cannot keep runs in {flag}={shown}: {why}; give a folder that can be written"


def save(report, store: Path) -> Path:
    """Write ``report`` (a ``model.Report`` or a report dict) as the store's next entry;
    returns its path. Numbering and writing happen under the store's lock: runs finishing at
    once each get their own number."""
    from ...run.rundir import write_json

    store.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", str(report.created or ""))[:15] or "undated"
    with _locked(store):
        found = entries(store)  # one scan of the folder
        number = found[-1][0] + 1 if found else 1
        path = store / f"{number:04d}_{slug(str(report.model or 'model'))}_{stamp}.json"
        write_json(path, report.to_json())
    return path


@contextmanager
def _locked(store: Path, deadline_s: float = LOCK_DEADLINE_S) -> Iterator[None]:
    """``flock`` on ``<store>/.lock`` (dropped by the kernel if the holder dies), waited for
    at most ``deadline_s``: a save takes milliseconds. Without fcntl (Windows), unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(store / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > give_up:
                    raise OSError(f"{store}: the store is locked by another run for more "
                                  f"than {deadline_s:g} s ({store / LOCK_FILE})") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # closing drops the flock


_ENTRY = re.compile(r"^\d{4,}_(?P<slug>.*)_(?:[0-9T]+|undated)\.json$")


def _of_model(path: Path, model: str) -> bool:
    """Whether the stored run at ``path`` is ``model``'s: its name's whole slug first (cheap),
    then the report's own ``model`` (slugs are cut at 60 characters, so two long specs can
    share one). An entry that cannot be read is taken by its name: its fault shows when it is
    loaded as the baseline."""
    m = _ENTRY.match(path.name)
    if m is None or m["slug"] != slug(model):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            stored = json.load(f).get("model")
    except (OSError, ValueError, AttributeError):
        return True
    return stored is None or stored == model


def find(store: Path, ref: str, model: str | None = None) -> Path:
    """``latest``, a number (``3`` or ``0003``), or a path to a report. With ``model``,
    ``latest`` is that model's latest stored run (the entry's name carries its slug): a store
    shared by two models' runs would otherwise gate one on the other's. A number or a path is
    taken as given, whoever's run it is."""
    ref = (ref or "latest").strip()
    if ref == "latest":
        found = entries(store)
        if not found:
            raise StoreError(f"no stored run in {store} to compare with; store one first with "
                             "--duplexact-autosave")
        if model is None:
            return found[-1][1]
        mine = [path for _, path in reversed(found) if _of_model(path, model)]
        if not mine:
            others = ", ".join(p.name for _, p in found[-3:])
            raise StoreError(f"no stored run of {model} in {store} (the latest: {others}); "
                             "store one with --duplexact-autosave, or name a stored run by "
                             "its number to compare with another model's")
        return mine[0]
    if ref.isdigit():
        for number, path in entries(store):
            if number == int(ref):
                return path
        known = ", ".join(f"{n:04d}" for n, _ in entries(store)) or "none"
        raise StoreError(f"no stored run {ref} in {store} (stored: {known})")
    path = Path(ref)
    if path.is_file():
        return path
    raise StoreError(f"{ref}: neither 'latest', a stored run number, nor a report file")
