"""Installing the kit in a model's environment as docs/bridge-protocol.md §8 says, with no
package index (pytest-duplexact is on none): a wheel built from this checkout goes into a fresh
virtual environment with ``--no-deps --no-index``, and the documented example bridge serves
from it. The environment gets numpy and websockets (which the kit imports) linked from ours,
and nothing else of ours: the package it imports must be the wheel's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import websockets

from tests.bridges.test_example import DOC, example
from tests.support.servers import LISTENING, child

ROOT = Path(__file__).parents[2]
# the model's environment sees none of ours (the test run's PYTHONPATH names this checkout)
ALONE = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def test_the_docs_say_how_to_install_without_an_index():
    section = DOC.read_text(encoding="utf-8").split("## 8.", 1)[1].split("## 9.", 1)[0]
    assert "pip install --no-deps pytest-duplexact websockets" not in section  # no index has it
    for way in ("python -m build --wheel", "pip install --no-deps dist/pytest_duplexact-",
                "pip install --no-deps /path/to/pytest-duplexact", "git+https://",
                "--ignore-requires-python"):
        assert way in section, way


def _run(*argv, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done


def test_a_wheel_of_the_checkout_installs_with_no_deps_and_serves(tmp_path):
    src = tmp_path / "src"  # what the build reads, copied: the build writes into its tree
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("pytest_duplexact", "suites", "fixtures"):
        shutil.copytree(ROOT / name, src / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    # the documented way is `python -m build --wheel`; pip's own builder runs the same
    # backend and needs no package of its own (no index here: the environment's setuptools)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(tmp_path / "dist"), str(src))
    wheel = next((tmp_path / "dist").glob("pytest_duplexact-*.whl"))

    env = tmp_path / "model-env"
    _run(sys.executable, "-m", "venv", "--without-pip", str(env))
    python = env / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", str(wheel))
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                     "['purelib'])").stdout.strip())
    for module in (numpy, websockets):  # the model's environment has these already
        folder = Path(module.__file__).parent
        (site / folder.name).symlink_to(folder)
        libs = folder.parent / f"{folder.name}.libs"
        if libs.is_dir():
            (site / libs.name).symlink_to(libs)

    script = tmp_path / "my_bridge.py"
    script.write_text(example(), encoding="utf-8")
    where = _run(str(python), "-c", "import pytest_duplexact.bridges as b; print(b.__file__)",
                 cwd=tmp_path, env=ALONE).stdout.strip()
    assert where.startswith(str(site)), where  # the wheel's copy, not this checkout's
    with child(script, "--port", "0", python=str(python), cwd=tmp_path, env=ALONE,
               ready=LISTENING, stops_on_stdin=False, stderr=subprocess.PIPE) as served:
        line = served.line
    assert re.match(r"listening on ws://127\.0\.0\.1:\d+ \(model my-model: stepped", line), line
