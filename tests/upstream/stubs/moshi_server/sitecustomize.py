"""Loaded first in the process of Moshi's / PersonaPlex's own ``moshi.server`` (Python imports
``sitecustomize`` from its path at start): what the harness changes there, and nothing else.

* The network: every ``connect`` of an internet socket to anything but 127.0.0.1 / ::1 is
  refused (``OSError``) and written to ``$DUPLEXACT_STUB_LOG`` as ``{"event": "outbound",
  "to": ...}``, so a test can assert that none was tried (PersonaPlex's ``get_lan_ip`` opens a
  UDP socket "to" 8.8.8.8; the hub is also kept off by ``HF_HUB_OFFLINE=1``).
* ``$DUPLEXACT_HUB_FILES`` (JSON ``{"repo/file": "/local/path"}``): ``hf_hub_download`` of
  those names returns the local file, any other raises as offline (PersonaPlex downloads its
  repo's ``config.json`` unconditionally, "to increment download counter").
* CPU: ``torch.cuda.synchronize`` is a no-op when CUDA is absent (Moshi's ``warmup`` calls it
  unconditionally; on a CPU build of torch it raises).
* ``aiohttp.web.run_app`` given no host (PersonaPlex ignores its ``--host``: every interface)
  listens on 127.0.0.1 only.
* ``$DUPLEXACT_TINY_LOADERS`` (a JSON file of ``{"seanet": .., "transformer": .., "quantizer":
  .., "lm": ..}``): PersonaPlex's loaders build its fixed 7B shapes from module dicts; these
  replace their values, so its own ``get_mimi`` / ``get_moshi_lm`` load the tiny random
  checkpoint (Moshi's take a config file instead).
"""

import json
import os
import socket
import sys
import threading
import time

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_lock = threading.Lock()


def _log(event, **fields):
    path = os.environ.get("DUPLEXACT_STUB_LOG")
    if path:
        with _lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": time.monotonic(), "event": event, **fields}) + "\n")


def _guarded(method):
    def connect(self, address, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            _log("outbound", to=str(address[0]), port=int(address[1]))
            raise OSError(f"harness: no connection beyond 127.0.0.1 ({address[0]})")
        return method(self, address, *args)
    return connect


socket.socket.connect = _guarded(socket.socket.connect)
socket.socket.connect_ex = _guarded(socket.socket.connect_ex)


class _Finder:
    """Patches a module right after it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in _PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, patch = spec.loader, _PATCHES[name]
        run = loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        loader.exec_module = exec_module
        return spec


def _hub(module):
    files = json.loads(os.environ.get("DUPLEXACT_HUB_FILES") or "{}")
    real = module.hf_hub_download

    def hf_hub_download(repo_id, filename, *args, **kwargs):
        local = files.get(f"{repo_id}/{filename}")
        if local:
            _log("hub_local", file=f"{repo_id}/{filename}")
            return local
        _log("hub_refused", file=f"{repo_id}/{filename}")
        return real(repo_id, filename, *args, **kwargs)  # HF_HUB_OFFLINE=1: raises

    module.hf_hub_download = hf_hub_download


def _torch(module):
    if not module.cuda.is_available():
        module.cuda.synchronize = lambda *a, **k: None


def _loaders(module):
    path = os.environ.get("DUPLEXACT_TINY_LOADERS")
    if not path:
        return
    tiny = json.load(open(path, encoding="utf-8"))
    for name, key in (("_seanet_kwargs", "seanet"), ("_transformer_kwargs", "transformer"),
                      ("_quantizer_kwargs", "quantizer"), ("_lm_kwargs", "lm")):
        getattr(module, name).update(tiny[key])


def _web(module):
    real = module.run_app

    def run_app(app, *args, **kwargs):
        if kwargs.get("host") is None:  # PersonaPlex passes none: every interface
            kwargs["host"] = "127.0.0.1"
            _log("bound_loopback")
        return real(app, *args, **kwargs)

    module.run_app = run_app


_PATCHES = {"huggingface_hub": _hub, "torch": _torch, "moshi.models.loaders": _loaders,
            "aiohttp.web": _web}
sys.meta_path.insert(0, _Finder())
