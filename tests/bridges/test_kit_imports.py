"""The kit runs in a model's own environment (``pip install --no-deps pytest-duplexact
websockets``): ``pytest_duplexact.bridges`` must import with nothing but the standard library,
numpy and websockets, and pull in none of the plugin's other packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest_duplexact

ROOT = Path(pytest_duplexact.__file__).resolve().parent.parent
KIT = ("pytest_duplexact.bridges", "pytest_duplexact.bridges.wire",
       "pytest_duplexact.bridges.kit")

# A finder that refuses every top-level package outside the standard library except numpy
# and websockets, as a model environment without our dependencies would.
PROBE = r"""
import importlib.abc, sys
ALLOWED = set(sys.stdlib_module_names) | {"numpy", "websockets", "pytest_duplexact"}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ALLOWED:
            raise ImportError(f"{name} is not installed in a model environment")
sys.meta_path.insert(0, Refuse())
import importlib
for module in MODULES:
    importlib.import_module(module)
ours = sorted(m for m in sys.modules if m.startswith("pytest_duplexact.")
              and not m.startswith("pytest_duplexact.bridges"))
print(" ".join(ours))
"""


def test_the_kit_imports_only_stdlib_numpy_and_websockets():
    code = f"MODULES = {KIT!r}\n" + PROBE
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", f"the kit pulls in {res.stdout.strip()}"


# The plugin's own dependencies, which a model's environment need not have (a model bridge may
# import its model's stack: torch, moshi, ...).
PLUGIN_ONLY = ("soundfile", "soxr", "openai", "pytest", "xdist", "scipy", "onnxruntime",
               "matplotlib", "faster_whisper", "pyarrow", "silero_vad")
DENY_PROBE = r"""
import importlib, importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in DENY:
            raise ImportError(f"{name} is not installed in a model environment")
sys.meta_path.insert(0, Refuse())
importlib.import_module(MODULE)
"""


def test_the_moshi_bridge_needs_none_of_the_plugins_own_dependencies():
    code = f"DENY = {PLUGIN_ONLY!r}\nMODULE = 'pytest_duplexact.bridges.moshi_bridge'\n" + DENY_PROBE
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
