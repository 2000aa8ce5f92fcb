"""A fake of the Hugging Face hub endpoints ``huggingface_hub.snapshot_download`` calls for a
dataset, on 127.0.0.1, serving one local folder as one commit (point HF_ENDPOINT at it):

    GET  /api/datasets/{repo}/revision/{rev}       repo info: id, sha, siblings
    GET  /api/datasets/{repo}/tree/{rev}[/{path}]  recursive listing (files, LFS for parquet)
    HEAD /datasets/{repo}/resolve/{rev}/{path}     X-Repo-Commit, ETag / X-Linked-Etag,
    GET  /datasets/{repo}/resolve/{rev}/{path}     Content-Length / X-Linked-Size; the bytes

(shapes as in huggingface_hub 2.4: hf_api.repo_info / list_repo_tree / RepoFile,
file_download.get_hf_file_metadata). Parquet files are served as LFS files whose ETag is
their sha256, like the hub. Every request is recorded in ``requests``; anything else is a 404
(recorded too, so a test sees an unexpected call).

``misbehave`` makes every request go wrong the way a broken hub or proxy does: ``"silent"``
accepts and never answers; ``"drip"`` answers one byte per ``drip_s`` forever; ``"echo401"`` /
``"echo400"`` refuse, quoting the request's headers (the Authorization header included) back.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support.servers import threaded

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, repo: str, folder: Path, misbehave: str | None = None,
                 drip_s: float = 0.5):
        if misbehave not in (None, "silent", "drip", "echo401", "echo400"):
            raise ValueError(f"unknown misbehave {misbehave!r}")
        self.misbehave, self.drip_s = misbehave, drip_s
        self.closing = threading.Event()
        self.repo, self.folder = repo, Path(folder)
        self.requests: list[tuple[str, str]] = []
        self.files = {str(p.relative_to(self.folder)).replace("\\", "/"): p
                      for p in sorted(self.folder.rglob("*")) if p.is_file()}
        self.sha256 = {k: hashlib.sha256(p.read_bytes()).hexdigest()
                       for k, p in self.files.items()}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.served = threaded(self.server)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.served.start()
        return self

    def __exit__(self, *exc):
        self.closing.set()  # releases the silent and dripping handlers
        self.served.stop()

    # --- responses ----------------------------------------------------------------------
    def _lfs(self, rel: str) -> bool:
        return rel.endswith(".parquet")

    def _entry(self, rel: str) -> dict:
        data = self.files[rel].read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        e = {"type": "file", "oid": blob, "size": len(data), "path": rel}
        if self._lfs(rel):
            e["lfs"] = {"oid": self.sha256[rel], "size": len(data), "pointerSize": 134}
        return e

    def _json(self, h, obj, status=200):
        body = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _not_found(self, h, head: bool):
        body = b'{"error": "Entry not found"}'
        h.send_response(404)
        h.send_header("Content-Type", "application/json")
        h.send_header("X-Error-Code", "EntryNotFound")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _misbehave(self, h) -> None:
        try:
            self._go_wrong(h)
        except OSError:  # the client gave up (killed at its deadline): that is the point
            pass
        h.close_connection = True

    def _go_wrong(self, h) -> None:
        if self.misbehave == "silent":
            self.closing.wait()
        elif self.misbehave == "drip":
            for byte in b"HTTP/1.1 200 OK\r\nX-Drip: " + b"a" * 100_000:
                if self.closing.wait(self.drip_s):
                    return
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
        else:
            quoted = "; ".join(f"{k}: {v}" for k, v in h.headers.items())
            self._json(h, {"error": f"refused; request headers were: {quoted}"},
                       status=int(self.misbehave[-3:]))

    def _serve(self, h, head: bool):
        path = unquote(urlsplit(h.path).path)
        self.requests.append((h.command, h.path))
        if self.misbehave:
            return self._misbehave(h)
        api = f"/api/datasets/{self.repo}/"
        res = f"/datasets/{self.repo}/resolve/"
        if not head and path.startswith(api + "revision/"):
            return self._json(h, {"id": self.repo, "sha": COMMIT, "private": False,
                                  "siblings": [{"rfilename": r} for r in self.files]})
        if not head and path.startswith(api + "tree/"):
            rest = path[len(api + "tree/"):]
            rev, _, sub = rest.partition("/")
            if rev not in (COMMIT, "main"):
                return self._not_found(h, head)
            entries = [self._entry(r) for r in self.files if r.startswith(sub)]
            dirs = sorted({"/".join(r.split("/")[:k]) for r in self.files
                           for k in range(1, r.count("/") + 1)})
            entries += [{"type": "directory", "oid": "0" * 40, "path": d, "size": 0}
                        for d in dirs if d.startswith(sub)]
            return self._json(h, entries)
        if path.startswith(res):
            rev, _, rel = path[len(res):].partition("/")
            if rev not in (COMMIT, "main") or rel not in self.files:
                return self._not_found(h, head)
            data = self.files[rel].read_bytes()
            h.send_response(200)
            h.send_header("X-Repo-Commit", COMMIT)
            if self._lfs(rel):
                h.send_header("ETag", f'"{self.sha256[rel]}"')
                h.send_header("X-Linked-Etag", f'"{self.sha256[rel]}"')
                h.send_header("X-Linked-Size", str(len(data)))
            else:
                h.send_header("ETag", f'"{self._entry(rel)["oid"]}"')
            h.send_header("Content-Length", str(len(data)))
            h.send_header("Content-Type", "application/octet-stream")
            h.end_headers()
            if not head:
                h.wfile.write(data)
            return
        return self._not_found(h, head)
