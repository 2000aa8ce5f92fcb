"""Each message once: the wall-time limit's stop (not a note, the same line again and pytest's
banner) and "resuming ..." (not at the start and again in the summary).

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()
RUN = ("--duplexact-model=oracle", "--duplexact-action=take_turn", "-p", "no:cacheprovider",
       "-q")


# the oracle, at least 0.3 s per instance: the 1 s limit falls inside the 9-instance run
# however fast the machine scores (the plain oracle ran all 9 in under a second)
SLOW_ORACLE = """
import time

from pytest_duplexact.models.providers.oracle import OracleModel


class SlowOracle(OracleModel):
    def start(self, info):
        time.sleep(0.3)
        super().start(info)
"""


def test_the_wall_limit_is_said_once(pytester):
    pytester.makepyfile(slow_oracle=SLOW_ORACLE)
    res = inproc(pytester, "--duplexact-model=slow_oracle:SlowOracle", *RUN[1:],
                 "--duplexact-run-dir=run", "--duplexact-max-wall=1s")
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED
    assert out.count("wall-time limit of 1 s reached") == 1, out
    assert out.count("--duplexact-resume=") == 1, out
    assert out.count("have no outcome") == 1, out
    res.stdout.fnmatch_lines(["wall-time limit of 1 s reached after * of 9 instances; resume "
                              "with pytest --duplexact-resume=*run (* selected instance(s) "
                              "have no outcome)"])


def test_resuming_is_said_once(pytester):
    res = inproc(pytester, *RUN, "--duplexact-limit=1", "--duplexact-run-dir=run")
    assert res.ret == 0
    res = inproc(pytester, "--duplexact-resume=run", "-p", "no:cacheprovider",
                 "-q")
    out = res.stdout.str()
    assert res.ret == 0
    assert out.count("duplexact: resuming ") == 2, out  # the settings taken, what is reused
    assert out.count("3 of 3 selected instance(s) finished and reused") == 1, out


def test_the_resume_command_keeps_the_gates_and_the_baseline(pytester):
    """Gates and the baseline are not in run.json, yet they decide the exit status: the
    printed resume command carries them (shell-quoted), so the resumed run still fails the
    gate the stopped one was given, and its report has the Gates and Baseline sections."""
    import re
    import shlex

    from tests.support.runs import read_report

    assert inproc(pytester, *RUN, "--duplexact-limit=1", "--duplexact-run-dir=B").ret == 0
    pytester.makepyfile(slow_oracle=SLOW_ORACLE)
    res = inproc(pytester, "--duplexact-model=slow_oracle:SlowOracle", *RUN[1:],
                 "--duplexact-run-dir=run", "--duplexact-max-wall=1s",
                 "--duplexact-gate=take_turn.I < 0.5", "--duplexact-gate=take_turn.I>=0",
                 "--duplexact-baseline=B/report.json", "--duplexact-baseline-alpha=0.01",
                 "--duplexact-baseline-ignore-borderline")
    out = res.stdout.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED, out
    said = re.search(r"resume with (pytest --duplexact-resume=.*?) \(\d+ selected", out)
    assert said, out
    words = shlex.split(said.group(1))
    assert words[1:] == [f"--duplexact-resume={pytester.path / 'run'}",
                         "--duplexact-gate=take_turn.I < 0.5", "--duplexact-gate=take_turn.I>=0",
                         "--duplexact-baseline=B/report.json",
                         "--duplexact-baseline-alpha=0.01",
                         "--duplexact-baseline-ignore-borderline"], said.group(1)
    again = inproc(pytester, *words[1:], "-p", "no:cacheprovider", "-q")
    assert again.ret == pytest.ExitCode.TESTS_FAILED, again.stdout.str()
    rep = read_report(pytester.path / "run")
    assert [(g["gate"], g["passed"]) for g in rep["gates"]] == [
        ("take_turn.I < 0.5", False), ("take_turn.I>=0", True)], rep["gates"]
    assert rep["baseline"]["path"].endswith("report.json"), rep["baseline"]
