"""`duplexact models NAME` as a user types it (issue 31, friction): a model whose packages are
missing gives its install command once, pinned and complete in itself (it pointed at .ci/run,
unpinned, on each of four lines), and a misspelt name gets a did-you-mean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _models(tmp_path: Path, *args: str, hide: tuple[str, ...] = ()):
    """The command in a fresh interpreter; ``hide``: packages it must find missing (a
    sitecustomize marks them absent, as on a machine without them)."""
    (tmp_path / "sitecustomize.py").write_text(
        f"import sys\nsys.modules.update(dict.fromkeys({list(hide)!r}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "models", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_package_s_install_command_is_said_once_and_pinned(tmp_path):
    # every package the listing checks for moshi is hidden: the outcome cannot depend on which
    # of them this environment happens to have (a fresh `pip install -e ".[dev]"` lacks
    # safetensors, .ci/run's moshi step installs it)
    needs = ("moshi", "sentencepiece", "safetensors", "einops", "huggingface_hub")
    res = _models(tmp_path, "moshi", hide=needs)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("moshi  (stepped)") and lines[0].endswith("[not ready]")
    assert [ln.split()[1] for ln in lines if ln.strip().endswith(" missing")] == list(needs)
    [install] = [ln for ln in lines if "pip install" in ln]  # once, for all of them
    assert "pip install --no-deps moshi==0.2.13 && pip install 'sphn>=0.2,<0.3' " \
           "'sentencepiece>=0.2,<0.3' 'einops>=0.7,<0.9'" in install
    assert ".ci" not in res.stdout
    assert len(lines) <= 20


def test_a_misspelt_model_gets_a_did_you_mean(tmp_path):
    res = _models(tmp_path, "mosh")
    assert res.returncode == 1 and res.stdout == ""
    [line] = res.stderr.splitlines()
    assert line.startswith("duplexact models: 'mosh' is not a built-in model (did you mean "
                           "'moshi'?); built-ins: silent, ")


def test_the_docs_give_the_command_the_hint_gives():
    from pytest_duplexact.models.catalogue.requirements import MOSHI_INSTALL

    first, second = MOSHI_INSTALL.split(" && ")
    for doc in ("README.md", "docs/models.md"):
        text = (ROOT / doc).read_text(encoding="utf-8").replace('"', "'")
        assert first in text and second in text, doc
