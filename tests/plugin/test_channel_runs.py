"""--duplexact-channel end to end (stepped models, small selections): the endpoint baseline
interrupts itself under its own echo and compare shows the drop with its flips; the oracle,
which reads the annotations, is unchanged by a phone line; a channelled run resumes exactly,
never into a run of another channel; recorded: re-scores a channelled run.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.inner_runs import as_user
from tests.support.runs import comparable

inproc = as_user()

DELAYED = ["--duplexact-condition=take_turn.delayed", "-p", "no:cacheprovider"]
ONE_EACH = ["--duplexact-condition=take_turn.immediate,stop.direct_interruption",
            "--duplexact-limit=1", "-p", "no:cacheprovider"]


def _report(run: Path) -> dict:
    return json.loads((run / "report.json").read_text())


def _verdicts(rep: dict) -> dict:
    return {i["id"]: (i["immediate"]["verdict"], i["timing"], i.get("latency"))
            for i in rep["instances"]}


def test_endpoint_interrupts_itself_under_its_echo(pytester):
    clean = inproc(pytester, "--duplexact-model=endpoint",
                   "--duplexact-run-dir=clean", *DELAYED)
    clean.assert_outcomes(passed=3)
    echo = inproc(pytester, "--duplexact-model=endpoint", "--duplexact-run-dir=echo",
                  "--duplexact-channel=echo:-6@50", *DELAYED)
    echo.assert_outcomes(failed=3)
    rep = _report(pytester.path / "echo")
    assert rep["settings"]["channel"] == "echo:-6@50"
    assert "channel" not in _report(pytester.path / "clean")["settings"]
    for inst in rep["instances"]:  # it cut its own reply short: no substantive speech left
        folder = pytester.path / "echo" / inst["recording"]
        assert (folder / "channel_input.flac").is_file()
        assert "no substantive model speech" in inst["immediate"]["reason"]
    out = subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "compare",
                          str(pytester.path / "clean" / "report.json"),
                          str(pytester.path / "echo" / "report.json")],
                         capture_output=True, text=True, cwd=pytester.path, timeout=120)
    text = out.stdout
    assert "take_turn.delayed.I" in text and "-100.0 points" in text
    assert "Flips (3)" in text and text.count("I success->failure") == 3
    assert "through channel clean, B through channel echo:-6@50" in text


@pytest.fixture(scope="module")
def clean_and_phone(tmp_path_factory) -> Path:
    """The oracle, autosaved, through no channel and through a phone line (one instance of two
    conditions each): one pair of runs for the tests of both that read them."""
    home = tmp_path_factory.mktemp("channels")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "DUPLEXACT_TEST_"))}
    for name, extra in (("clean", []), ("phone", ["--duplexact-channel=phone"])):
        res = subprocess.run([sys.executable, "-m", "pytest", "--duplexact-model=oracle",
                              f"--duplexact-run-dir={name}", "--duplexact-autosave",
                              "--duplexact-storage=store", *extra, *ONE_EACH],
                             cwd=home, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and "2 passed" in res.stdout, res.stdout + res.stderr
    return home


def test_oracle_under_a_phone_line_is_unchanged(clean_and_phone):
    clean, phone = (_verdicts(_report(clean_and_phone / n)) for n in ("clean", "phone"))
    assert {k: v[0] for k, v in clean.items()} == {k: v[0] for k, v in phone.items()}
    take_turn = next(k for k in clean if k.startswith("take_turn"))
    assert clean[take_turn] == phone[take_turn]  # scheduled from the annotations alone
    # stop: the oracle yields on the cue's energy, which the line delays by its filters'
    # 18 ms (docs/channels.md): at most one 20 ms frame later
    stop = next(k for k in clean if k.startswith("stop"))
    assert 0 <= phone[stop][1] - clean[stop][1] <= 0.02 + 1e-6


def test_autosaved_runs_under_two_channels_make_a_robustness_section(clean_and_phone):
    assert "robustness" not in _report(clean_and_phone / "clean")
    sec = _report(clean_and_phone / "phone")["robustness"]
    assert [r["channel"] for r in sec["channels"]] == ["clean", "phone"]
    assert sec["channels"][1]["pairing"] == "paired"


@pytest.mark.slow
def test_a_channelled_run_resumes_exactly_and_only_itself(pytester):
    args = ["--duplexact-model=endpoint", "--duplexact-channel=noise:babble@10+room:0.3",
            *ONE_EACH]
    inproc(pytester, "--duplexact-run-dir=run", *args)
    run = pytester.path / "run"
    first = _report(run)
    victim = run / first["instances"][0]["recording"]
    heard = (victim / "channel_input.flac").read_bytes()
    (victim / "outcome.json").unlink()
    again = inproc(pytester, f"--duplexact-resume={run}")
    assert "1 finished" in again.stdout.str() or "resuming" in again.stdout.str()
    assert (victim / "channel_input.flac").read_bytes() == heard  # the same noise, re-drawn
    assert comparable(_report(run)) == comparable(first)
    other = inproc(pytester, f"--duplexact-resume={run}",
                   "--duplexact-channel=phone")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    assert "channel: 'noise:babble@10+room:0.3' -> 'phone'" in other.stderr.str()
    rescored = inproc(pytester, f"--duplexact-model=recorded:{run}",
                      "--duplexact-run-dir=again", *ONE_EACH)
    assert rescored.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert _verdicts(_report(pytester.path / "again")) == _verdicts(first)


def test_a_bad_channel_is_one_line(pytester):
    res = inproc(pytester, "--duplexact-model=silent",
                 "--duplexact-channel=noise:pnik@10", *ONE_EACH)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "did you mean 'pink'" in err and "Traceback" not in err


def test_an_echo_shorter_than_a_frame_is_refused_before_the_run(pytester):
    res = inproc(pytester, "--duplexact-model=endpoint",
                 "--duplexact-channel=echo:-6@10",
                 "--duplexact-run-dir=r", *ONE_EACH)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "at least 20 ms" in res.stderr.str()
    assert not (pytester.path / "r").exists()
