"""pytest-asyncio (the dev extra) in a user's folder (issue 31, friction): its warning about
``asyncio_default_fixture_loop_scope`` is the user's project's to settle, not the plugin's (the
option decides how the user's own async fixtures run). The README says so and gives the one
line that settles it; this checks that the line does."""

from __future__ import annotations

from pathlib import Path

import pytest

WARNING = "asyncio_default_fixture_loop_scope\" is unset"
RUN = ("--duplexact-model=silent", "--duplexact-action=wait", "--collect-only", "-q",
       "-p", "no:cacheprovider")


def test_the_readme_says_what_to_do():
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "install the plugin without `[dev]`, or set the option in your project " \
           "(`asyncio_default_fixture_loop_scope = \"function\"` under " \
           "`[tool.pytest.ini_options]`)" in readme


def test_the_readme_s_line_settles_the_warning(pytester, monkeypatch):
    pytest.importorskip("pytest_asyncio")
    monkeypatch.setenv("PYTHONWARNINGS", "default")  # deprecations shown, as the README says
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\n")
    res = pytester.runpytest_subprocess(*RUN, timeout=300)
    assert WARNING in res.stdout.str() + res.stderr.str()  # what a user of [dev] sees
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\n'
                                         'asyncio_default_fixture_loop_scope = "function"\n')
    res = pytester.runpytest_subprocess(*RUN, timeout=300)
    assert res.ret == 0
    assert WARNING not in res.stdout.str() + res.stderr.str()
