"""A run whose model cannot be built, and a collect-only run, leave no run folder (issue 31,
leftovers): the factory was called at the first instance, after the run folder was made, so a
factory that raised left duplexact-runs/<name>-<stamp>/ and a resume hint for a run that never
started; --collect-only made a run folder although it measures nothing.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import pytest

from tests.support.inner_runs import as_user, said

FACTORIES = '''
def broken(**options):
    raise RuntimeError("weights not found: /models/ckpt.safetensors")


def picky(level="1", **options):
    raise ValueError(f"level must be a number, got {level!r}")
'''


run = as_user("-p", "no:cacheprovider", "--duplexact-limit=1", "--duplexact-action=take_turn")


def refused(pytester, res, *words: str) -> str:
    lines = said(res)
    assert res.ret == pytest.ExitCode.USAGE_ERROR, lines
    assert len(lines) <= 2, lines  # the estimate's line at most, then the refusal
    assert lines[-1].startswith("ERROR: "), lines
    for w in words:
        assert w in lines[-1], (w, lines[-1])
    text = "\n".join(lines)
    assert "Traceback" not in text and "resume" not in text and "run directory" not in text
    assert not (pytester.path / "duplexact-runs").exists()
    return lines[-1]


def test_a_factory_that_raises_is_one_line_and_no_folder(pytester):
    pytester.makepyfile(my_model=FACTORIES)
    res = run(pytester, "--duplexact-model=my_model:broken")
    refused(pytester, res, "--duplexact-model=my_model:broken", "could not be built",
            "RuntimeError: weights not found: /models/ckpt.safetensors", "nothing was run")


def test_a_builtin_refusing_an_option_value_in_its_constructor_is_one_line(pytester):
    res = run(pytester, "--duplexact-model=endpoint", "--duplexact-model-option=silence_s=-1")
    refused(pytester, res, "--duplexact-model=endpoint", "silence_s must be > 0",
            "--duplexact-model-option")


def test_a_refused_option_leaves_the_named_folder_unmade(pytester):
    """The user's input refused: the folder named with --duplexact-run-dir is not created (as
    any usage error at configure), so the same command, fixed, can use it."""
    pytester.makepyfile(my_model=FACTORIES)
    res = run(pytester, "--duplexact-model=my_model:picky", "--duplexact-model-option=level=x",
              "--duplexact-run-dir=r")
    refused(pytester, res, "ValueError: level must be a number, got 'x'")
    assert not (pytester.path / "r").exists()


def test_collect_only_makes_no_run_folder(pytester):
    res = run(pytester, "--duplexact-model=silent", "--collect-only", "-q")
    out = res.stdout.str()
    assert res.ret == pytest.ExitCode.OK, out
    assert "test_take_turn" in out
    assert "run directory" not in out and "resume" not in out
    assert not (pytester.path / "duplexact-runs").exists()
    assert not any(pytester.path.rglob("run.json"))


def test_collect_only_leaves_a_named_folder_unmade(pytester):
    res = run(pytester, "--duplexact-model=silent", "--collect-only", "-q",
              "--duplexact-run-dir=r")
    assert res.ret == pytest.ExitCode.OK, said(res)
    assert not (pytester.path / "r").exists()


COUNTED = '''
from pathlib import Path

from pytest_duplexact.models.providers.silent import SilentModel


def factory(**options):
    with open(Path(__file__).with_name("built.txt"), "a") as f:
        f.write("x")
    return SilentModel()
'''


def test_a_serial_run_builds_its_model_once_before_its_folder(pytester):
    """Built at configure, then handed to the harness: never a second build (weights loaded
    twice) for moving the build before the run folder."""
    pytester.makepyfile(counted=COUNTED)
    res = run(pytester, "--duplexact-model=counted:factory", "--duplexact-run-dir=r")
    assert res.ret == pytest.ExitCode.TESTS_FAILED, said(res)  # silent misses take_turn
    assert res.parseoutcomes().get("failed") == 3 and not res.parseoutcomes().get("errors")
    assert (pytester.path / "built.txt").read_text() == "x"
    assert (pytester.path / "r" / "report.json").is_file()
