"""A bad number for one of the run's knobs is refused once, at configure: one line, the usage
exit, no test run, no run folder (issue 31 item 6, issue 32 item 12). Before, the harness's
numbers errored every test (72 UsageErrors, exit 1) and a huge batch came out as "the model
could not be built: OverflowError".

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()

BAD = [
    ("--duplexact-batch=0", "--duplexact-batch must be >= 1 and at most 1024, got 0"),
    ("--duplexact-batch=abc", "--duplexact-batch / duplexact_batch: expected an integer, "
                              "got 'abc'"),
    ("--duplexact-batch=99999999999999999999",
     "--duplexact-batch must be >= 1 and at most 1024, got 99999999999999999999"),
    ("--duplexact-concurrency=0", "--duplexact-concurrency must be >= 1 and at most 1024"),
    ("--duplexact-timeout=-5", "--duplexact-timeout must be > 0 and at most 86400 seconds, "
                               "got -5.0"),
    ("--duplexact-timeout=nan", "--duplexact-timeout must be > 0"),
    ("--duplexact-judge-timeout=inf", "--duplexact-judge-timeout must be > 0 and at most "
                                      "86400 seconds, got inf"),
    ("--duplexact-max-cost=-1", "--duplexact-max-cost: a budget must be > 0, got -1.0"),
    # no budget is the option left out; an inf budget reached report.json as Infinity
    ("--duplexact-max-cost=inf", "--duplexact-max-cost: a budget must be finite, got inf; "
                                 "leave the option out for no budget"),
    ("--duplexact-max-wall=inf", "--duplexact-max-wall: a duration must be finite, got "
                                 "'inf'; leave the option out for no limit"),
    ("--duplexact-baseline-alpha=2", "--duplexact-baseline-alpha: baseline alpha must be in "
                                     "(0, 1), got 2.0"),
]


@pytest.mark.parametrize("arg,line", BAD, ids=[a.split("=", 1)[0][12:] + "=" +
                                               a.split("=", 1)[1][:6] for a, _ in BAD])
def test_a_bad_number_is_one_line_at_configure(pytester, arg, line):
    res = inproc(pytester, "--duplexact-model=silent", "--duplexact-action=wait",
                 arg, "-p", "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert len(said) == 1 and said[0].startswith(f"ERROR: {line}"), said
    assert not (pytester.path / "duplexact-runs").exists()  # nothing was started


@pytest.mark.parametrize("arg,line", [
    ("--duplexact-max-cost=-1", "--duplexact-max-cost: a budget must be > 0, got -1.0"),
    ("--duplexact-max-wall=2d", "--duplexact-max-wall: expected a duration such as 90s"),
    ("--duplexact-compare=99", "--duplexact-compare=99: no stored run 99 in "),
    ("--duplexact-simulator=gpt", "--duplexact-simulator='gpt': use 'rule' or 'llm'"),
    ("--duplexact-report=.", "cannot write --duplexact-report .: . is a folder"),
], ids=["max-cost", "max-wall", "compare", "simulator", "report"])
def test_a_dry_run_refuses_what_the_run_would(pytester, arg, line):
    """--duplexact-estimate is a cluster user's dry run: it passed values the run then
    refused (the queued job died on them). It checks what needs no model and no network."""
    res = inproc(pytester, "--duplexact-model=silent", "--duplexact-action=wait",
                 "--duplexact-estimate", arg, "-p", "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said[-1].startswith(f"ERROR: {line}"), said


def test_a_dry_run_needs_no_key_for_a_hosted_model(pytester, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = inproc(pytester, "--duplexact-model=gpt-realtime", "--duplexact-action=wait",
                 "--duplexact-estimate", "--duplexact-max-cost=5", "-p", "no:cacheprovider")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["duplexact: estimate: *", "*model gpt-realtime: *USD*"])


@pytest.mark.parametrize("flag", ["--duplexact-judge=my-local-llm",
                                  "--duplexact-audio-judge=gpt-audio-1.5"])
def test_a_judge_asked_for_without_a_key_is_one_line(pytester, monkeypatch, flag):
    """A judge named on the command line without OPENAI_API_KEY was dropped: a green run
    whose S was silently not judged (report.json alone said why)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = inproc(pytester, "--duplexact-model=silent", "--duplexact-action=wait", flag,
                 "--duplexact-judge-base-url=http://127.0.0.1:9/v1", "-p", "no:cacheprovider")
    said = [s for s in res.stdout.lines + res.stderr.lines if s.strip()]
    assert res.ret == pytest.ExitCode.USAGE_ERROR, said
    assert said[-1] == (f"ERROR: {flag}: no API key: set the OPENAI_API_KEY environment "
                        "variable (any value for a self-hosted server that checks none)")
    # "off" and "none" ask for no judge (judges/panel.py turns them off)
    for off in ("off", "none"):
        res = inproc(pytester, "--duplexact-model=silent", "--duplexact-action=wait",
                     "--duplexact-limit=1", f"--duplexact-judge={off}", "-p", "no:cacheprovider")
        assert res.ret != pytest.ExitCode.USAGE_ERROR, off
