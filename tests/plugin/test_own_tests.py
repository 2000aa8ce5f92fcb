"""A benchmark run inside a user's project: the project's own tests are not collected (the
benchmark's exit status must not depend on them), the run says so once with the command that
runs both, and that command does run both.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

from tests.support.inner_runs import as_user

inproc = as_user()

ARGS = ["--duplexact-model=silent", "--duplexact-condition=wait.inter_sentential_pause",
        "-p", "no:cacheprovider"]
NOTE = "this run collects the DuplexAct suites only"


def project(pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")


def test_the_projects_tests_are_named_once_and_the_named_command_runs_both(pytester):
    project(pytester)
    res = inproc(pytester, *ARGS, "-v")
    out = res.stdout.str()
    assert res.ret == 0, out
    assert out.count(NOTE) == 1, out
    assert ("(testpaths: tests) are not collected. To run both: pytest ./tests --pyargs "
            "pytest_duplexact.suites --duplexact-model=silent") in out
    assert "test_mine" not in out
    res.assert_outcomes(passed=3)  # the condition's three instances, nothing else

    both = inproc(pytester, "./tests", "--pyargs", "pytest_duplexact.suites", *ARGS,
                  "-v")
    assert both.ret == 0, both.stdout.str()
    both.assert_outcomes(passed=4)
    assert "test_mine PASSED" in both.stdout.str() and NOTE not in both.stdout.str()


def test_a_folder_without_tests_gets_no_note(pytester):
    res = inproc(pytester, *ARGS)
    assert res.ret == 0 and NOTE not in res.stdout.str()


def test_test_files_are_found_where_pytest_would_collect_them(pytester):
    """With a pytest configuration, the whole folder is looked at, breadth-first, skipping
    what pytest skips (norecursedirs: build/, dot folders; virtualenvs), past thousands of
    data files; without one (a home folder, say) only tests/ and test/ are."""
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    data = pytester.mkdir("data")
    for k in range(6000):  # a voice project's clips: not .py, not counted
        (data / f"clip{k:04d}.flac").write_bytes(b"")
    for skipped in ("build/lib/pkg/tests", ".venv/lib", "env2"):
        (pytester.path / skipped).mkdir(parents=True)
        (pytester.path / skipped / "test_old.py").write_text("def test_old():\n    pass\n")
    (pytester.path / "env2" / "pyvenv.cfg").write_text("")
    # deeper than every skipped file: found first only because those folders are skipped
    deep = pytester.path / "src" / "pkg" / "tests" / "unit"
    deep.mkdir(parents=True)
    (deep / "test_a.py").write_text("def test_a():\n    pass\n")
    res = inproc(pytester, *ARGS)
    assert "(e.g. src/pkg/tests/unit/test_a.py) are not collected. To run both: pytest . " \
        "--pyargs" in res.stdout.str(), res.stdout.str()

    (pytester.path / "pytest.ini").unlink()  # no configuration: src/ is not looked in
    res = inproc(pytester, *ARGS)
    assert NOTE not in res.stdout.str()
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_b.py").write_text("def test_b():\n    pass\n")
    res = inproc(pytester, *ARGS)
    assert "(e.g. tests/test_b.py) are not collected" in res.stdout.str()


def test_the_command_quotes_what_a_shell_would_split():
    from types import SimpleNamespace

    from pytest_duplexact.pytest_plugin.own_tests import note

    config = SimpleNamespace(args_source=__import__("pytest").Config.ArgsSource.TESTPATHS,
                             args=["tests/unit", "it tests"])
    text = note(config, "recorded:/runs/my run")
    assert text.endswith("pytest ./tests/unit './it tests' --pyargs pytest_duplexact.suites "
                         "--duplexact-model='recorded:/runs/my run'"), text
