"""A benchmark run inside a user's project: the project's own tests are not collected (the
benchmark's exit status must not depend on them), the run says so once with the command that
runs both, and that command does run both."""

from __future__ import annotations

ARGS = ["--duplexact-model=silent", "--duplexact-condition=wait.inter_sentential_pause",
        "-p", "no:cacheprovider"]
NOTE = "this run collects the DuplexAct suites only"


def project(pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")


def test_the_projects_tests_are_named_once_and_the_named_command_runs_both(pytester):
    project(pytester)
    res = pytester.runpytest_subprocess(*ARGS, "-v", timeout=300)
    out = res.stdout.str()
    assert res.ret == 0, out
    assert out.count(NOTE) == 1, out
    assert ("(testpaths: tests) are not collected. To run both: pytest tests --pyargs "
            "pytest_duplexact.suites --duplexact-model=silent") in out
    assert "test_mine" not in out
    res.assert_outcomes(passed=3)  # the condition's three instances, nothing else

    both = pytester.runpytest_subprocess("tests", "--pyargs", "pytest_duplexact.suites", *ARGS,
                                         "-v", timeout=300)
    assert both.ret == 0, both.stdout.str()
    both.assert_outcomes(passed=4)
    assert "test_mine PASSED" in both.stdout.str() and NOTE not in both.stdout.str()


def test_a_folder_without_tests_gets_no_note(pytester):
    res = pytester.runpytest_subprocess(*ARGS, timeout=300)
    assert res.ret == 0 and NOTE not in res.stdout.str()


def test_test_files_without_testpaths_are_found_in_the_folder(pytester):
    pytester.mkdir("sub")
    (pytester.path / "sub" / "test_a.py").write_text("def test_a():\n    pass\n")
    pytester.mkdir(".venv")
    res = pytester.runpytest_subprocess(*ARGS, timeout=300)
    assert "(e.g. sub/test_a.py) are not collected. To run both: pytest . --pyargs" in \
        res.stdout.str()

