"""The estimate and the budget through `pytest` (docs/runs.md, "Before a run"):
``--duplexact-estimate`` calls no model; ``--duplexact-max-cost`` stops a run within one
trial's cost, every started trial scored, and a resume finishes it to the report an
unbudgeted run gives, serially and under -n 2.

The judged runs are stepped (the oracle) with the fake OpenAI judge on 127.0.0.1 billing
tokens, so they run below the wall clock; one short run streams against the fake realtime
server, which bills audio seconds."""

from __future__ import annotations

import os
import socketserver
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.rules import requires
from pytest_duplexact.spend.estimate import stream_bounds
from tests.fakes import FakeOpenAI
from tests.plugin.test_realtime_run import KEY, realtime_server  # noqa: F401 (a fixture)
from tests.support.inner_runs import AS_USER, run
from tests.support.runs import read_report
from tests.support.servers import threaded

# the fake judge bills 10 input and 5 output tokens a call: 0.2 USD at these prices
PRICES = '[models."gpt-5.4"]\ninput_tokens = 0.01\noutput_tokens = 0.02\n'
JUDGED = ("--duplexact-model=oracle", "--duplexact-action=take_turn", "--duplexact-limit=2",
          "--duplexact-judge=gpt-5.4", "--duplexact-prices=prices.toml", "-p",
          "no:cacheprovider")
# what differs between a budgeted-then-resumed run and an unbudgeted one by design
NOT_COMPARED = set(VOLATILE_KEYS) | {"measured", "budget", "estimate", "settings"}


def _comparable(rep: dict) -> dict:
    out = {k: v for k, v in rep.items() if k not in NOT_COMPARED}
    out["instances"] = [{k: v for k, v in i.items() if k != "recording"}
                        for i in rep["instances"]]
    return out


@pytest.fixture(scope="module")
def judge_server():
    with FakeOpenAI() as server:  # one URL for every run: it is part of the run's settings
        yield server


@pytest.fixture
def judge(monkeypatch, pytester, judge_server):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    pytester.path.joinpath("prices.toml").write_text(PRICES)
    return judge_server


def _started(run: Path) -> set[str]:
    """Instances whose trial began: each has a folder in the run directory."""
    return {p.name for p in (run / "instances").iterdir() if p.is_dir()}


@pytest.fixture(scope="module")
def unbudgeted(tmp_path_factory, judge_server):
    """The same selection without a budget, once for the module (a plain subprocess: pytester
    is per test)."""
    where = tmp_path_factory.mktemp("unbudgeted")
    where.joinpath("prices.toml").write_text(PRICES)
    res = subprocess.run([sys.executable, "-m", "pytest", *JUDGED,
                          f"--duplexact-judge-base-url={judge_server.url}",
                          "--duplexact-run-dir=full"], cwd=where, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "OPENAI_API_KEY": KEY})
    assert res.returncode == 0, res.stdout + res.stderr
    return read_report(where / "full")


@pytest.mark.slow
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_budget_stops_cleanly_and_resume_finishes_the_run(pytester, judge, unbudgeted, xdist):
    assert unbudgeted["totals"]["instances"] == 6
    per_trial = unbudgeted["cost"]["total"] / 6
    assert per_trial == pytest.approx(0.2)  # one judge call per immediate success
    # serially in process (no process start; each run builds its own config and session, as
    # a new pytest process does), under -n 2 in a subprocess, as before
    inprocess = not xdist
    res = run(pytester, *JUDGED, f"--duplexact-judge-base-url={judge.url}",
              "--duplexact-run-dir=run", "--duplexact-max-cost=0.5", *xdist,
              *(AS_USER if inprocess else ()), inprocess=inprocess)
    out = res.stdout.str()
    rep = read_report(pytester.path / "run")
    assert res.ret == pytest.ExitCode.INTERRUPTED, out
    done = rep["totals"]["instances"]
    assert 0 < done < 6, out
    assert rep["budget"]["stopped"].startswith("budget of 0.50 USD reached"), rep["budget"]
    # measured spend: within one trial's cost of the budget (xdist: each worker's first
    # trial starts before the controller has measured any)
    lanes = 2 if xdist else 1
    assert rep["cost"]["total"] <= 0.5 + lanes * per_trial + 1e-9
    assert rep["budget"]["spent"] == pytest.approx(rep["cost"]["total"])
    # every trial that started was finished and scored: none lost
    assert _started(pytester.path / "run") == {i["id"] for i in rep["instances"]}
    line = next(n for n in rep["notes"] if n.startswith("budget of"))
    assert f"after {done} of 6 instances; resume with pytest --duplexact-resume=" in line
    assert line in out
    assert any("have no outcome" in n for n in rep["notes"])  # marked incomplete
    assert not (pytester.path / "run" / "budget-stop.json").exists()
    again = run(pytester, *JUDGED, f"--duplexact-judge-base-url={judge.url}",
                f"--duplexact-resume={pytester.path / 'run'}", *xdist,
                *(AS_USER if inprocess else ()), inprocess=inprocess)
    assert again.ret == 0, again.stdout.str()
    resumed = read_report(pytester.path / "run")
    assert "budget" not in resumed
    assert _comparable(resumed) == _comparable(unbudgeted)


def test_estimate_only_calls_no_model(pytester, monkeypatch):
    """gpt-realtime pointed at a listener that counts connections: none arrives, nothing is
    written, and the estimate is printed (with -n 2 and a shard too)."""
    accepted = []

    class Count(socketserver.BaseRequestHandler):
        def handle(self):
            accepted.append(self.client_address)

    with threaded(socketserver.TCPServer(("127.0.0.1", 0), Count)) as port:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
        res = run(pytester, "--duplexact-model=gpt-realtime", "--duplexact-estimate", "-n",
                  "2", "--duplexact-shard=1/2", "--duplexact-concurrency=16", "-p",
                  "no:cacheprovider", timeout=120)
    out = res.stdout.str()
    assert res.ret == 0, out + res.stderr.str()
    assert accepted == []
    assert "duplexact: estimate: " in out and "model gpt-realtime: " in out
    assert "as of 2025-08" in out
    assert not (pytester.path / "duplexact-runs").exists()


def test_a_budget_needs_prices_for_what_the_run_bills(pytester, monkeypatch):
    monkeypatch.setenv("XAI_API_KEY", KEY)
    res = run(pytester, "--duplexact-model=grok-voice", "--duplexact-max-cost=5",
              "-p", "no:cacheprovider", *AS_USER, inprocess=True)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--duplexact-max-cost: no price for 'grok-voice' (model)" in res.stderr.str()
    bad = run(pytester, "--duplexact-model=oracle", "--duplexact-max-wall=soon",
              "-p", "no:cacheprovider", *AS_USER, inprocess=True)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--duplexact-max-wall: expected a duration such as 90s" in bad.stderr.str()
    assert not (pytester.path / "duplexact-runs").exists()


def test_a_price_file_with_a_misnamed_table_is_refused_before_the_run(pytester):
    """``[model."x"]`` (for ``[models."x"]``) was ignored, and the budget then asked for the
    price the file held: the file is refused instead, naming the field, with the fix."""
    pytester.path.joinpath("prices.toml").write_text(
        '[model."my-local-llm"]\ninput_tokens = 1e-6\n')
    res = run(pytester, "--duplexact-model=oracle", "--duplexact-prices=prices.toml",
              "--duplexact-max-cost=1", "-p", "no:cacheprovider", *AS_USER, inprocess=True)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert ("--duplexact-prices: prices.toml: field 'model': unknown table (did you mean "
            "'models'?)") in err and "Traceback" not in err
    assert not (pytester.path / "duplexact-runs").exists()


@pytest.mark.slow
def test_streaming_budget_run_against_the_fake_realtime_server(pytester, monkeypatch,
                                                               realtime_server):  # noqa: F811
    """Two trials in flight at once (concurrency 2), priced per second of audio sent: the
    second is admitted while the first runs, the third never starts."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", realtime_server)
    pytester.path.joinpath("prices.toml").write_text(
        '[models."gpt-realtime"]\naudio_in_s = 0.01\n')
    res = pytester.runpytest_subprocess(
        "--duplexact-model=gpt-realtime", "--duplexact-action=take_turn", "--duplexact-limit=1",
        "--duplexact-concurrency=2", "--duplexact-run-dir=run", "--duplexact-prices=prices.toml",
        "--duplexact-timing-tolerance=off",  # the guard: test_timing_guard_run.py, load-free
        "--duplexact-max-cost=0.3", "-p", "no:cacheprovider", timeout=240)
    out = res.stdout.str()
    rep = read_report(pytester.path / "run")
    assert res.ret == pytest.ExitCode.INTERRUPTED, out
    assert rep["totals"] == {"instances": 2, "errors": 0}, out
    assert _started(pytester.path / "run") == {i["id"] for i in rep["instances"]}
    spent = rep["cost"]["total"]
    seconds = rep["usage"]["model"]["audio_in_s"]
    assert spent == pytest.approx(seconds * 0.01, abs=1e-4)
    assert spent <= 0.3 + spent / 2 + 1e-9  # within one trial's cost
    est = rep["estimate"]
    assert est["instances"] == 3 and est["concurrency"] == 2
    # Direct Replay streams exactly what the estimate counts (the adapter meters what it sent)
    ran = {i["id"] for i in rep["instances"]}
    expected = sum(stream_bounds(i)[0]
                   for i in load_dataset(bundled_root(), requires=requires).instances
                   if i.id in ran)
    assert seconds == pytest.approx(expected, rel=0.05)
    assert rep["measured"]["cost"] == spent and rep["measured"]["instances"] == 2
    assert "duplexact: estimate: 3 instances" in out


# the budget's clock jumps an hour each time a finished test's usage is recorded (after its
# trial ran, before the budget decides whether another may start)
_JUMPING_CLOCK = """
import time

import pytest_duplexact.spend.budget as budget

jumped = [0.0]


class Clock:
    @staticmethod
    def monotonic():
        return time.monotonic() + jumped[0]


def record(self, *args, _record=budget.Budget.record):
    jumped[0] += 3600
    return _record(self, *args)


budget.time = Clock
budget.Budget.record = record
"""


@pytest.mark.parametrize("limit, left", [(1, False), (3, True)], ids=["complete", "left"])
def test_the_wall_budget_stops_only_when_something_is_left(pytester, limit, left):
    """The wall-time limit passed during the last instance: the run is complete, exits 0
    and asks for no resume (issue 32 item 5); passed with an instance to go, it stops (the
    trial already in flight, prefetched, is finished first)."""
    pytester.makeconftest(_JUMPING_CLOCK)
    res = pytester.runpytest_subprocess(
        "--duplexact-model=silent", "--duplexact-condition=wait.inter_sentential_pause",
        f"--duplexact-limit={limit}", "--duplexact-max-wall=1h", "--duplexact-run-dir=run",
        "-p", "no:cacheprovider", timeout=300)
    out = res.stdout.str()
    rep = read_report(pytester.path / "run")
    done = rep["totals"]["instances"]
    assert (1 <= done < limit) if left else done == limit, out
    if left:
        assert res.ret == pytest.ExitCode.INTERRUPTED, out
        assert rep["budget"]["stopped"] == "wall-time limit of 1.0 h reached"
        assert "--duplexact-resume=" in out
    else:
        assert res.ret == 0, out
        assert rep["budget"]["stopped"] is None
        assert "resume" not in out and "Interrupted" not in out
        assert not any("resume" in n for n in rep.get("notes", []))
