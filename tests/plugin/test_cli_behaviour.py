"""The plugin as a user drives it: options and ini keys, node ids, outcomes, errors, gates and
exit status (xdist = serial: tests/run/test_determinism.py). Each test runs pytest inside a temp
dir (so the suites are found from outside the checkout) on a tiny selection of the bundled set,
in process, as tests/plugin/test_first_day.py does: each run builds its own config and session
(plugins from their entry points, exit status, terminal output), as a new pytest process does,
without a process start's ~2 CPU-s. A user's folder has no asyncio ini: pytest-asyncio is off."""

from __future__ import annotations

import textwrap

import pytest

from pytest_duplexact.data import taxonomy
from tests.support.inner_runs import as_user
from tests.support.runs import read_report

run = as_user()
SMALL = ["--duplexact-action=take_turn", "--duplexact-limit=1", "-p", "no:cacheprovider"]

CRASHY = textwrap.dedent('''
    """A stepped model that speaks like the oracle but crashes mid-instance on 'delayed'."""
    from pytest_duplexact.models.providers.oracle import OracleModel

    class Crashy(OracleModel):
        def start(self, info):
            super().start(info)
            self._crash = info.instance.condition == "delayed"
            self._steps = 0

        def step(self, frame):
            self._steps += 1
            if self._crash and self._steps == 50:
                raise RuntimeError("simulated model crash")
            return super().step(frame)

    def factory(**options):
        return Crashy(**options)
''')


def test_help_lists_every_option_with_its_ini_key(pytester):
    from pytest_duplexact.pytest_plugin.options import OPTIONS

    res = run(pytester, "--help")
    out = res.stdout.str()
    for o in OPTIONS:
        assert o.flag in out
        assert o.ini in out, f"ini key {o.ini} missing from --help"
    text = " ".join(out[out.index("--duplexact-concurrency"):].split())
    assert "default 1: one at a time" in text[:400], text[:400]  # issue 15 item 9


def test_collect_ids_and_k_selection(pytester):
    res = run(pytester, "--duplexact-model=silent", "--collect-only", "-q",
              "-p", "no:cacheprovider")
    out = res.stdout.str()
    for c in taxonomy.CONDITIONS:
        assert f"test_{c.action}[{c.id}-" in out, c.key
    assert "test_take_turn[delayed-casual-01]" in out
    res = run(pytester, "--duplexact-model=silent", "--collect-only", "-q", "-k", "delayed",
              "-p", "no:cacheprovider")
    lines = [ln for ln in res.stdout.lines if "::" in ln]
    assert lines and all("delayed" in ln for ln in lines)


def test_ini_keys_configure_the_run(pytester):
    pytester.makeini(textwrap.dedent("""
        [pytest]
        duplexact_model = silent
        duplexact_action = stop
        duplexact_report = report.json
    """))
    res = run(pytester, "-p", "no:cacheprovider")
    # silent never speaks: every stop trial is excluded (skipped), never failed
    res.assert_outcomes(skipped=3)
    rep = read_report(pytester.path)
    stop = rep["summary"]["actions"]["stop"]["counts"]
    assert stop["excluded"] == 3 and stop["I"] is None
    assert "3 excluded" in res.stdout.str()


def test_outcomes_map_to_pytest(pytester):
    res = run(pytester, "--duplexact-model=silent", *SMALL,
              "--duplexact-report=report.json")
    res.assert_outcomes(failed=3)
    out = res.stdout.str()
    assert "immediate execution failed: no substantive model speech at all" in out
    assert "model  |" in out  # the compact timeline lanes
    res = run(pytester, "--duplexact-model=oracle", *SMALL, "--duplexact-report=report.json")
    res.assert_outcomes(passed=3)
    rep = read_report(pytester.path)
    # no judge configured: S is not judged, never a silent pass in the rates
    tt = rep["summary"]["actions"]["take_turn"]["counts"]
    assert tt["I"] == 1.0 and tt["S"] is None and tt["not_judged"] == 3
    assert res.ret == 0


def test_model_crash_is_an_error_not_a_miss(pytester):
    pytester.makepyfile(crashy=CRASHY)
    res = run(pytester, "--duplexact-model=crashy:factory", *SMALL,
              "--duplexact-report=report.json", "--duplexact-gate=take_turn.I>=0.5")
    res.assert_outcomes(passed=2, errors=1)
    assert "simulated model crash" in res.stdout.str()
    rep = read_report(pytester.path)
    tt = rep["summary"]["actions"]["take_turn"]
    assert tt["counts"]["errors"] == 1 and tt["counts"]["n_I"] == 2
    assert tt["conditions"]["delayed"]["I"] is None  # no valid trial, not 0 %
    err = [i for i in rep["instances"] if i["error"]]
    assert len(err) == 1 and "simulated model crash" in err[0]["error"]
    assert rep["totals"]["errors"] == 1
    # the gate passes on the two measured instances, but one could not be measured
    res.stdout.fnmatch_lines(["*passed take_turn.I>=0.5*"])
    assert res.ret == 1


def test_gates_decide_exit_status(pytester):
    # silent fails every take_turn instance, but the gate on wait passes: exit 0
    res = run(pytester, "--duplexact-model=silent", "--duplexact-action=take_turn,wait",
              "--duplexact-limit=1", "-p", "no:cacheprovider", "--duplexact-gate=wait.I>=0.9")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["*passed wait.I>=0.9: wait.I = 100.0%*"])
    res = run(pytester, "--duplexact-model=silent", "--duplexact-action=take_turn,wait",
              "--duplexact-limit=1", "-p", "no:cacheprovider",
              "--duplexact-gate=wait.I>=0.9", "--duplexact-gate=take_turn.delayed.I>=60%",
              "--duplexact-gate=take_turn.S>=0")
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*FAILED take_turn.delayed.I>=60%: take_turn.delayed.I = 0.0%,"
                              " needs >= 60.0% (off by 60.0 points)*"])
    # a gate on a rate that was never measured fails and says why, even at >= 0
    res.stdout.fnmatch_lines(["*FAILED take_turn.S>=0: take_turn.S was not measured*"])


@pytest.mark.parametrize("args,msg", [
    (["--duplexact-model=no_such_model"], "unknown model"),
    (["--duplexact-model=silent", "--duplexact-action=walk"], "unknown action"),
    (["--duplexact-model=silent", "--duplexact-gate=wait.I>>1"], "cannot parse gate"),
    (["--duplexact-model=silent", "--duplexact-gate=wiat.I>=0.9"],
     "unknown action 'wiat' (did you mean 'wait'?)"),
    (["--duplexact-model=silent", "--duplexact-limit=x"], "expected an integer"),
    (["--duplexact-model=silent", "--duplexact-data-mapping=m.toml"],
     "a mapping applies to released data only"),
    # an empty value (an unset CI variable) would run ungated and exit 0
    (["--duplexact-model=silent", "--duplexact-gate="], "--duplexact-gate= is empty (an unset "
     "variable?); give it a value or drop the option"),
    (["--duplexact-model=silent", "--duplexact-gate=wait.I>=0.9", "--duplexact-gate= "],
     "--duplexact-gate= is empty"),
    (["--duplexact-model=silent", "--duplexact-baseline="], "--duplexact-baseline= is empty"),
    (["--duplexact-model=silent", "--duplexact-compare="], "--duplexact-compare= is empty"),
])
def test_usage_errors(pytester, args, msg):
    res = run(pytester, *args, "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert msg in (res.stderr.str() + res.stdout.str()).lower()


def test_gates_never_pass_an_incomplete_run(pytester):
    """-x stops at endpoint's first failed instance: the gate on what was measured passes,
    but the selected instances left without an outcome keep the run from exiting 0."""
    res = run(pytester, "-x", "--duplexact-model=endpoint", "--duplexact-limit=1",
              "-p", "no:cacheprovider", "--duplexact-gate=backchannel.I<=0.5")
    out = res.stdout.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "have no outcome" in out, out
    res.stdout.fnmatch_lines(["*passed backchannel.I<=0.5*",
                              "*the gates passed on an incomplete run (* of 24 selected "
                              "instance(s) have no outcome): exit status 1, not 0*"])


def test_an_empty_ini_gate_is_unset(pytester):
    """An ini file expands no variables: an empty duplexact_gate / duplexact_baseline there is
    written on purpose and means unset (only an empty command-line value is refused)."""
    pytester.makeini("[pytest]\nduplexact_gate =\nduplexact_baseline =\n")
    res = run(pytester, "--duplexact-model=silent", "--duplexact-action=wait",
              "--duplexact-limit=1", "-p", "no:cacheprovider")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    assert "Gates" not in res.stdout.str()


def test_an_empty_shard_exits_0_with_an_empty_report_the_merge_takes(pytester):
    """A small selection over many shards leaves some empty. pytest's own status for that is
    5 (no tests), which fails an array task (the recipes go on to the merge on 0 or 1 only),
    so the merge never ran; the empty shard now exits 0, its empty report written."""
    import json

    from pytest_duplexact.report.store.merge import merge

    sel = ("--duplexact-model=endpoint", "--duplexact-action=wait", "--duplexact-limit=1",
           "-p", "no:cacheprovider")
    sizes, reports = {}, []
    for k in range(1, 5):  # 3 instances over 4 shards: one at least is empty
        res = run(pytester, *sel, f"--duplexact-shard={k}/4", f"--duplexact-run-dir=s{k}")
        assert res.ret == 0, res.stdout.str()
        reports.append(pytester.path / f"s{k}" / "report.json")
        sizes[k] = len(json.loads(reports[-1].read_text())["instances"])
        said = f"duplexact: shard {k}/4 holds none of the selected instances"
        assert (said in res.stdout.str()) == (sizes[k] == 0)
    assert sum(sizes.values()) == 3 and 0 in sizes.values()
    assert merge(reports)["totals"]["instances"] == 3
    # -k leaving nothing is the user's filter, not an empty shard: pytest's 5 stays
    res = run(pytester, *sel, "--duplexact-shard=1/4", "-k", "nothing")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
