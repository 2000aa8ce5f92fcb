"""``hf:REPO[@REV]`` or ``hf:/local/folder`` -> a local folder of the snapshot's parquet files
and, per config, the files that hold it.

Downloads go through ``huggingface_hub.snapshot_download`` with ``allow_patterns`` limited to
parquet, into the normal HF cache (HF_HOME / HF_HUB_CACHE), in a child process with a
deadline (hub.py: a hub that hangs or drips cannot hold the run, and Ctrl-C ends it). A
snapshot already complete in that cache is used without any request (``local_files_only``
first; huggingface_hub checks the cached tree listing for completeness); ``HF_HUB_OFFLINE=1``
never goes online. A branch name is therefore resolved once; pass ``@<commit>`` (or delete the
cache) to move to a newer revision.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..data.suggest import not_a_folder
from . import hub
from .errors import PYTEST_OPTIONS, Options, ReleasedDataError
from .mapping import Mapping


@dataclass(frozen=True)
class Snapshot:
    root: Path
    label: str  # what the user asked for, e.g. "LincolnD/DuplexAct@main" or the folder
    revision: str | None  # commit hash when downloaded
    files: dict[str, tuple[Path, ...]]  # config -> parquet files, sorted
    hashes: dict[str, str]  # relative path -> content identity (sha256)

    def key(self) -> str:
        h = hashlib.sha256()
        for rel in sorted(self.hashes):
            h.update(f"{rel}\0{self.hashes[rel]}\n".encode())
        return h.hexdigest()


def parse_spec(body: str) -> tuple[str | None, str | None, Path | None]:
    """``REPO[@REV]`` -> (repo, rev, None); ``/folder`` or ``./folder`` -> (None, None, path).
    Its messages, as all of this module's, leave the source out: the caller names it."""
    if body.startswith(("/", "./", "../", "~")) or os.path.isdir(body):
        try:
            return None, None, Path(body).expanduser().resolve()
        except RuntimeError:  # ~user of no such user
            raise ReleasedDataError(f"no home folder for {body.split('/', 1)[0]!r}") from None
    repo, _, rev = body.partition("@")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", repo):
        raise ReleasedDataError("expected hf:OWNER/NAME[@REVISION] or hf:/path/to/a/local/"
                                "snapshot/folder")
    return repo, rev or None, None


def _download(repo: str, rev: str | None, log=None) -> tuple[Path, str | None]:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ReleasedDataError(f"huggingface_hub is not installed ({e})") from None
    try:  # a complete cached snapshot: no request at all
        folder = snapshot_download(repo_id=repo, repo_type="dataset", revision=rev,
                                   allow_patterns=["*.parquet"], local_files_only=True)
        cached = None
    except Exception as e:  # LocalEntryNotFoundError, IncompleteSnapshotError, ...
        folder, cached = None, hub.scrub_hub(f"{type(e).__name__}: {e}")
    if folder is None:
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            raise ReleasedDataError(
                f"HF_HUB_OFFLINE is set and the HF cache has no complete snapshot of "
                f"this dataset ({cached}); run once online, or use hf:/path/to/a/folder")
        if log:
            log(f"duplexact: downloading the parquet files of {repo} (revision "
                f"{rev or 'main'}) into the Hugging Face cache")
        answer = hub.download(repo, rev, log)  # deadline, progress, Ctrl-C; token scrubbed
        if answer.get("error") == "unreachable":
            raise ReleasedDataError(f"cannot reach the hub and nothing is cached: "
                                    f"{answer['message']}")
        if "folder" not in answer:
            raise ReleasedDataError(f"download failed: {answer.get('message')}")
        folder = answer["folder"]
    folder = Path(folder)
    commit = folder.name if re.fullmatch(r"[0-9a-f]{40}", folder.name) else None
    return folder, commit


def _content_id(path: Path, memo: dict) -> str:
    """sha256 of a file. In the HF cache a snapshot file links to blobs/<sha256> (the LFS
    oid): that name is the hash, so a GB-sized file is not read again. Other files are hashed
    once per (path, size, mtime) and remembered in ``memo``."""
    real = path.resolve()
    if real.parent.name == "blobs" and re.fullmatch(r"[0-9a-f]{64}", real.name):
        return real.name
    st = real.stat()
    stamp = f"{real}\0{st.st_size}\0{st.st_mtime_ns}"
    if stamp in memo:
        return memo[stamp]
    h = hashlib.sha256()
    with open(real, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    memo[stamp] = h.hexdigest()
    return memo[stamp]


def cache_root() -> Path:
    """DUPLEXACT_CACHE_DIR, else $XDG_CACHE_HOME/duplexact, else ~/.cache/duplexact."""
    env = os.environ.get("DUPLEXACT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "duplexact"


def _hashes(root: Path, files: dict[str, tuple[Path, ...]]) -> dict[str, str]:
    """Content ids of the snapshot's files, with the memo of local files' hashes kept in the
    conversion cache (a local snapshot of GBs is not re-read on every run)."""
    memo_file = cache_root() / "released" / "file-hashes.json"
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        memo = {}
    if not isinstance(memo, dict) or not all(isinstance(v, str) for v in memo.values()):
        memo = {}  # damaged: a cache miss (every file hashed again), rewritten below
    before = dict(memo)
    out = {str(p.relative_to(root)).replace(os.sep, "/"): _content_id(p, memo)
           for ps in files.values() for p in ps}
    if memo != before:
        try:
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo_file.with_name(f".{memo_file.name}.{os.getpid()}")
            tmp.write_text(json.dumps(memo, sort_keys=True), encoding="utf-8")
            tmp.replace(memo_file)
        except OSError:  # a read-only cache only costs the re-hash next time
            pass
    return out


def config_files(root: Path, m: Mapping) -> dict[str, tuple[Path, ...]]:
    """Per config of the mapping, the parquet files of the first pattern that matches any."""
    rels = sorted(str(p.relative_to(root)).replace(os.sep, "/")
                  for p in root.rglob("*.parquet"))
    out: dict[str, tuple[Path, ...]] = {}
    for cfg in m.configs:
        for pattern in m.file_patterns:
            pat = pattern.format(config=cfg, split=m.split)
            hits = [r for r in rels if fnmatch.fnmatchcase(r, pat)]
            if hits:
                out[cfg] = tuple(root / r for r in hits)
                break
    return out


def resolve_snapshot(body: str, m: Mapping, log=None,
                     options: Options = PYTEST_OPTIONS) -> Snapshot:
    """The snapshot ``hf:<body>`` names; ``options`` spells the options its messages give."""
    repo, rev, folder = parse_spec(body)
    if folder is not None:
        if not folder.is_dir():
            raise ReleasedDataError(f"{not_a_folder(folder)}; give hf:/path/to/the/folder of "
                                    "the snapshot's parquet files, or hf:OWNER/NAME")
        root, commit, label = folder, None, str(folder)
    else:
        root, commit = _download(repo, rev, log)
        label = f"{repo}@{rev or 'main'}"
    files = config_files(root, m)
    if not files:
        pats = ", ".join(m.file_patterns)
        raise ReleasedDataError(
            f"no parquet file of any mapped config ({', '.join(m.configs)}) under "
            f"{root}; patterns tried: {pats} (set [source].files in a mapping file passed with {options.mapping})")
    return Snapshot(root, label, commit, files, _hashes(root, files))


STALE_TMP_S = 3600.0  # a conversion in progress writes every few seconds


def clean_stale_conversions(root: Path | None = None, older_than_s: float = STALE_TMP_S,
                            now: float | None = None) -> list[Path]:
    """Remove the ``.tmp-*`` folders of conversions killed midway (SIGKILL, power loss) from
    the conversion cache: those in which nothing changed for ``older_than_s``. Returns them."""
    import shutil
    import time

    root = cache_root() / "released" if root is None else root
    now = time.time() if now is None else now
    removed = []
    for tmp in root.glob(".tmp-*"):
        try:
            newest = max([tmp.stat().st_mtime] + [
                os.stat(os.path.join(d, n)).st_mtime
                for d, dirs, names in os.walk(tmp) for n in dirs + names])
        except OSError:  # vanished meanwhile (its conversion finished or another cleaned it)
            continue
        if now - newest > older_than_s:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed
