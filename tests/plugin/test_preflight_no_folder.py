"""A run refused before it starts leaves no run folder (issue 31, friction: 21 piled up): the
remote transcriber and the LLM simulator without their API key were refused only at the first
instance, as "the model could not be built", after the run folder was made.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()


@pytest.mark.parametrize("option", ["--duplexact-transcriber=whisper-1",
                                    "--duplexact-simulator=llm"])
def test_a_missing_key_is_refused_before_the_run_folder(pytester, monkeypatch, option):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = inproc(pytester, "--duplexact-model=silent", option, "-p",
                 "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said[-1] == (f"ERROR: {option}: no API key: set the OPENAI_API_KEY environment "
                        "variable"), said
    assert len(said) <= 2  # the estimate's line, then the refusal
    assert not (pytester.path / "duplexact-runs").exists()


@pytest.mark.parametrize("option,said_last", [
    ("--duplexact-transcriber=small", "ERROR: --duplexact-transcriber=small: unknown "
     "transcriber 'small'; known: offline, tiny.en, base, whisper-1, openai:MODEL, "
     "package.module:factory"),
    ("--duplexact-transcriber=no_such_module_xyz:make", "ERROR: "
     "--duplexact-transcriber=no_such_module_xyz:make: transcriber 'no_such_module_xyz:make': "
     "cannot load 'no_such_module_xyz:make': No module named 'no_such_module_xyz'"),
])
def test_a_transcriber_that_cannot_be_had_is_refused_before_the_run_folder(pytester, option,
                                                                          said_last):
    res = inproc(pytester, "--duplexact-model=silent", option, "-p",
                 "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said[-1] == said_last, said
    assert len(said) <= 2
    assert not (pytester.path / "duplexact-runs").exists()


@pytest.mark.parametrize("args,said_last", [
    (["--duplexact-condition=delayed"], "ERROR: --duplexact-condition needs --duplexact-model, "
     "and none was given, so no benchmark runs; name the model to test, e.g. "
     "--duplexact-model=oracle (`duplexact models` lists them)"),
    (["--duplexact-model=", "--duplexact-limit=1"], "ERROR: --duplexact-model is empty, so no "
     "benchmark runs; name the model to test, e.g. --duplexact-model=oracle (`duplexact "
     "models` lists them)"),
])
def test_benchmark_options_without_a_model_say_what_is_missing(pytester, args, said_last):
    """They ran nothing ("no tests ran", exit 5) without saying why."""
    res = inproc(pytester, *args, "-p", "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said == [said_last]
    assert not (pytester.path / "duplexact-runs").exists()


def test_a_project_of_its_own_tests_is_left_alone_without_a_model(pytester):
    """No --duplexact-* option on the command line: not a benchmark run, nothing refused (a
    project's ini settings for the plugin stay quiet)."""
    pytester.makeini("[pytest]\nduplexact_concurrency = 4\n")
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    res = inproc(pytester, "-p", "no:cacheprovider")
    assert res.ret == 0
    res.assert_outcomes(passed=1)


def test_a_selection_that_keeps_nothing_is_refused_before_the_run_folder(pytester):
    """It made a run folder of empty tables and exited 5 ("no tests ran")."""
    res = inproc(pytester, "--duplexact-model=oracle", "--duplexact-corpus=Candor",
                 "-p", "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said[-1] == ("ERROR: duplexact selection: --duplexact-corpus=Candor matches none of "
                        "the data's 72 instances (its instances name no corpus); widen the "
                        "selection"), said
    assert not (pytester.path / "duplexact-runs").exists()
