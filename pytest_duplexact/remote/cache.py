"""A request cache for judge, audio-judge, simulator and transcription calls (docs/judges.md).

Every request is keyed by the sha256 of its exact canonical form: endpoint, model, messages,
parameters, with audio replaced by its sha256 (so the key does not depend on how audio is
encoded in transit, and no audio is stored). One JSON file per entry,
``<dir>/<key[:2]>/<key>.json``, written to a temporary name and renamed, so a reader never sees
half an entry. An entry records its key, the request it answers and a checksum of the
response; an entry that does not parse, names another key, answers another request or fails
its checksum is ignored (counted as ``corrupt``) and the request is made again.

Only usable answers are stored: errors and malformed answers never are, so a later run retries
them. Nothing secret is part of a request: headers (and with them the API key) are not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..data.atomic import write_text

FORMAT_NAME = "duplexact-request-cache"
FORMAT_VERSION = 1


def canonical(obj: Any) -> str:
    """The one JSON spelling of ``obj`` that keys and checksums are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def request_key(request: dict) -> str:
    return sha256_hex(canonical(request))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0


class RequestCache:
    """Response store keyed by request; safe for several processes (xdist workers) at once:
    writers race only to rename complete files, and any complete file is a valid answer."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.stats = CacheStats()

    def path_of(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, request: dict) -> Any | None:
        """The stored response for ``request``, or None (missing or not trustworthy)."""
        key = request_key(request)
        path = self.path_of(key)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except OSError:
            self.stats.corrupt += 1
            return None
        entry = _valid_entry(raw, key, request)
        if entry is None:
            self.stats.corrupt += 1
            return None
        self.stats.hits += 1
        return entry["response"]

    def put(self, request: dict, response: Any) -> Path:
        key = request_key(request)
        path = self.path_of(key)
        entry = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "key": key,
            "request": request,
            "response": response,
            "response_sha256": sha256_hex(canonical(response)),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        write_text(path, json.dumps(entry, ensure_ascii=False, indent=1, sort_keys=True))
        self.stats.writes += 1
        return path


def _valid_entry(raw: str, key: str, request: dict) -> dict | None:
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT_NAME \
            or entry.get("version") != FORMAT_VERSION or entry.get("key") != key \
            or "response" not in entry:
        return None
    try:
        if canonical(entry.get("request")) != canonical(request):
            return None
        if entry.get("response_sha256") != sha256_hex(canonical(entry["response"])):
            return None
    except (TypeError, ValueError):
        return None
    return entry
