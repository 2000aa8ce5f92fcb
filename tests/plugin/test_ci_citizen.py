"""CI conventions, from a user's point of view: the GitHub Actions job summary, stored runs
with compare-with-latest, and a report copy that knows where its recordings are.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_duplexact.data.taxonomy import ACTIONS
from pytest_duplexact.report.store import saved as store
from pytest_duplexact.report.views import job_summary
from tests.support.inner_runs import as_user
from tests.support.runs import replicated_dataset

SMALL = ["--duplexact-condition=take_turn.delayed", "--duplexact-limit=1", "-p",
         "no:cacheprovider"]


inproc = as_user()
run = as_user(*SMALL)


def test_the_job_summary_is_appended_never_overwritten(pytester, monkeypatch):
    summary = Path(pytester.path, "step-summary.md")
    summary.write_text("# Build\nearlier step's text\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    res = run(pytester, "--duplexact-model=endpoint", "--duplexact-run-dir=r")
    assert res.ret == 0
    text = summary.read_text()
    assert text.startswith("# Build\nearlier step's text\n")
    assert "## DuplexAct: endpoint" in text and "Take Turn" in text
    assert f"summary appended to {summary}" in res.stdout.str()


def test_the_job_summary_stays_within_githubs_limit(tmp_path):
    from tests.report.helpers import mixed_report, parsed

    rep = mixed_report()
    target = tmp_path / "s.md"
    target.write_text("x" * (job_summary.LIMIT - 3000))  # earlier steps used most of it
    assert job_summary.append(parsed(rep), env={"GITHUB_STEP_SUMMARY": str(target)})
    assert target.stat().st_size <= job_summary.LIMIT
    assert "Failed instances" not in target.read_text()[-3000:]  # the compact form
    target.write_text("x" * (job_summary.LIMIT - 100))
    job_summary.append(parsed(rep), env={"GITHUB_STEP_SUMMARY": str(target)}, report_path="r.json")
    assert target.stat().st_size <= job_summary.LIMIT
    assert job_summary.append(parsed(rep), env={}) is None


def test_autosave_then_compare_with_latest_gates_on_a_significant_drop(pytester, tmp_path):
    # the bundled take_turn.delayed instances twice over: 6 pairs, so 6/6 -> 0/6 is a
    # significant paired drop (McNemar's exact p = 1/32, Holm over 2 comparisons: 1/16 < 0.1)
    data = replicated_dataset(tmp_path / "data", "take_turn", "delayed", copies=2)
    sel = [f"--duplexact-data={data}", "--duplexact-baseline-alpha=0.1", "-p",
           "no:cacheprovider"]
    good = inproc(pytester, "--duplexact-model=oracle", "--duplexact-autosave",
                  *sel)
    assert good.ret == 0 and "duplexact: stored this run as" in good.stdout.str()
    (first,) = store.entries(Path(pytester.path, ".duplexact"))
    assert first[0] == 1 and first[1].name.startswith("0001_oracle_")
    same = inproc(pytester, "--duplexact-model=oracle", "--duplexact-compare",
                  "--duplexact-autosave", *sel)
    assert same.ret == 0, same.stdout.str()
    assert len(store.entries(Path(pytester.path, ".duplexact"))) == 2
    report = _run_report(pytester, "oracle-*")
    assert report["baseline"]["passed"] and report["baseline"]["drops"] == []
    worse = inproc(pytester, "--duplexact-model=silent", "--duplexact-compare=1",
                   *sel)
    report = _run_report(pytester, "silent-*")
    b = report["baseline"]
    assert b["path"].endswith(first[1].name) and b["pairing"] == "paired"
    # every instance of the selection ran as a miss, not an error: the gate alone fails it
    assert report["totals"] == {"instances": 6, "errors": 0}
    assert not b["passed"] and b["drops"] == ["take_turn.I", "take_turn.delayed.I"]
    assert worse.ret == 1 and "FAILED baseline: 2 of 2 comparison(s)" in worse.stdout.str()


def _run_report(pytester, pattern: str) -> dict:
    """The report of the one run whose run directory matches ``pattern`` (the newest)."""
    runs = sorted(Path(pytester.path, "duplexact-runs").glob(pattern),
                  key=lambda p: p.stat().st_mtime_ns)
    return json.loads((runs[-1] / "report.json").read_text())


def test_compare_without_a_stored_run_is_a_usage_error(pytester):
    res = run(pytester, "--duplexact-model=silent", "--duplexact-compare")
    assert res.ret == 4 and "no stored run in" in res.stderr.str()
    res = run(pytester, "--duplexact-model=silent", "--duplexact-compare",
              "--duplexact-baseline=x.json")
    assert res.ret == 4 and "give one" in res.stderr.str()


def test_a_report_copy_points_at_its_run_directory(pytester):
    res = run(pytester, "--duplexact-model=silent", "--duplexact-run-dir=runs/a",
              "--duplexact-report=out/copy.json")
    assert "duplexact: run directory" in res.stdout.str() and "runs/a" in res.stdout.str()
    copy = json.loads(Path(pytester.path, "out/copy.json").read_text())
    inside = json.loads(Path(pytester.path, "runs/a/report.json").read_text())
    assert copy["run_dir"] == "../runs/a" and inside["run_dir"] == "."
    # the copy the user named has a plain file's mode (a shared folder's teammates read it);
    # the run's own stays private
    from pytest_duplexact.data.atomic import FILE_MODE

    assert Path(pytester.path, "out/copy.json").stat().st_mode & 0o777 == FILE_MODE
    assert Path(pytester.path, "runs/a/report.json").stat().st_mode & 0o777 == 0o600
    from pytest_duplexact.report.views.html import render
    from tests.report.helpers import parsed

    page = render(parsed(copy), report_path=Path(pytester.path, "out/copy.json"))
    assert "recordings not found" not in page


MISSES_AND_CRASHES = '''
from pytest_duplexact.models.providers.oracle import OracleModel
from pytest_duplexact.models.providers.silent import SilentModel

STARTS = []


class Model(SilentModel):
    """Silent (a miss on take_turn) except on 'delayed', where it crashes on its first try."""

    def start(self, info):
        STARTS.append(info.instance.id)
        if info.instance.condition == "delayed" and STARTS.count(info.instance.id) == 1:
            raise RuntimeError("first attempt crashes")
        super().start(info)


def factory(**options):
    return Model()
'''


def test_reruns_never_retry_a_miss_and_do_retry_an_error(pytester):
    """With pytest-rerunfailures a miss retried until it passes would inflate rates."""
    pytester.makepyfile(flaky_model=MISSES_AND_CRASHES)
    res = inproc(
        pytester, "--duplexact-model=flaky_model:factory",
        "--duplexact-condition=take_turn.immediate,take_turn.delayed", "--duplexact-limit=1",
        "--reruns=2", "-p", "no:cacheprovider",
        "-v")
    out = res.stdout.str()
    outcomes = res.parseoutcomes()
    # immediate: silent misses it, once, not re-run; delayed: crashes once, re-run, then a miss
    assert outcomes.get("failed") == 2 and outcomes.get("rerun") == 1, out
    reruns = [ln for ln in out.splitlines() if "RERUN" in ln]
    assert len(reruns) == 1 and "test_take_turn[delayed" in reruns[0], reruns


def test_an_unmeasured_immediate_stage_is_skipped_not_passed(pytester):
    """Backchannel's immediate stage needs the judges: without them nothing was measured."""
    res = inproc(pytester, "--duplexact-model=oracle",
                 "--duplexact-action=backchannel", "--duplexact-limit=1",
                 "-rs", "-p", "no:cacheprovider")
    res.assert_outcomes(skipped=2)
    assert "not judged:" in res.stdout.str()


def test_junit_xml_has_flat_typed_properties_and_the_runs_rates(pytester):
    """What a CI dashboard reads, parsed with the standard library."""
    import xml.etree.ElementTree as ET

    res = inproc(pytester, "--duplexact-model=endpoint",
                 "--duplexact-action=take_turn", "--duplexact-limit=1",
                 "--junitxml=junit.xml", "-p", "no:cacheprovider")
    assert res.ret in (0, 1)
    root = ET.parse(Path(pytester.path, "junit.xml")).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    rates = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert rates["duplexact.model"] == "endpoint" and rates["duplexact.instances"] == "3"
    assert abs(float(rates["duplexact.take_turn.I"]) - 1 / 3) < 1e-3  # endpoint: delayed only
    assert "duplexact.take_turn.delayed.I" in rates
    assert rates["duplexact.take_turn.borderline_I"] == "0"
    cases = suite.findall("testcase")
    assert len(cases) == 3
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.find("properties")}
        assert props["duplexact.action"] == "take_turn"
        assert props["duplexact.verdict_I"] in ("success", "failure")
        assert ".." in props["duplexact.window"]
        assert props["duplexact.borderline"] == "false"
        assert props["duplexact.recording"].startswith("instances/")
        assert not any(v.startswith("{") for v in props.values())  # no Python reprs


@pytest.mark.parametrize("gate, ok, workers", [
    ("take_turn.I>=0.9", False, ()), ("take_turn.I>=0.1", True, ()),
    # under xdist the controller writes the XML from the workers' replayed reports: the
    # gates testcase is the controller's own, once
    ("take_turn.I>=0.9", False, ("-n", "2"))], ids=["failed", "passed", "failed-xdist"])
def test_junit_xml_records_the_gate_outcome(pytester, gate, ok, workers):
    """A gate that fails the run fails the XML too (a ``duplexact::gates`` testcase) and the
    suite says how each gate came out; the instances keep their testcases."""
    import xml.etree.ElementTree as ET

    res = inproc(pytester, "--duplexact-model=endpoint", "--duplexact-action=take_turn",
                 "--duplexact-limit=1", f"--duplexact-gate={gate}", "--junitxml=junit.xml",
                 "-p", "no:cacheprovider", *workers)
    assert res.ret == (0 if ok else 1)
    root = ET.parse(Path(pytester.path, "junit.xml")).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props[f"duplexact.gate[{gate}]"] == ("passed" if ok else "failed")
    assert props[f"duplexact.gate[{gate}].message"].startswith("passed" if ok else "FAILED")
    assert props["duplexact.passed"] == str(ok).lower()
    cases = suite.findall("testcase")
    assert len(cases) == 4  # the 3 instances and the gates
    gates = [c for c in cases if c.get("classname") == "duplexact" and c.get("name") == "gates"]
    assert len(gates) == 1
    failure = gates[0].find("failure")
    assert (failure is None) == ok
    if not ok:
        assert gate in failure.get("message") and int(suite.get("failures")) >= 1


FAILING_FACTORY = '''
def factory(**options):
    raise RuntimeError("weights not found: /models/ckpt.safetensors")
'''


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_factory_that_raises_is_one_error_in_short_with_its_traceback_on_file(pytester,
                                                                               workers):
    """Where the run goes on to a folder (one the user named; every xdist worker builds its
    own model), the failed build is one error per process, shown short: the message, where the
    factory raised, and the instance's error.txt, which holds the factory's traceback."""
    pytester.makepyfile(broken_model=FAILING_FACTORY)
    res = inproc(pytester, "--duplexact-model=broken_model:factory",
                 "--duplexact-action=take_turn", "--duplexact-run-dir=r",
                 "-p", "no:cacheprovider", *workers)
    out = res.stdout.str()
    errors = res.parseoutcomes().get("errors")
    assert res.ret == 2  # pytest's "interrupted": the run stopped at the first instance
    assert errors == (2 if workers else 1), out
    assert "the model could not be built" in out
    # counted above the short summary: on CI (CI or BUILD_NUMBER set) pytest repeats the whole
    # message there, elsewhere only its first line, trimmed to the terminal
    errors_section = out.split("short test summary info")[0]
    assert errors_section.count("raised in factory (broken_model.py:2)") == errors, out
    # the short form: none of the plugin's own frames, no Python traceback on the terminal
    assert "Traceback" not in out and "session.py" not in out and "def factory" not in out
    report = json.loads(Path(pytester.path, "r", "report.json").read_text())
    assert report["totals"]["errors"] == errors  # counted, not "0 errors"
    saved = list(Path(pytester.path, "r").rglob("error.txt"))
    assert len(saved) == errors
    for path in saved:
        text = path.read_text()
        assert 'broken_model.py", line 2, in factory' in text
        assert "RuntimeError: weights not found: /models/ckpt.safetensors" in text
        assert f"{path.relative_to(pytester.path)}" in out  # the short form points at it


def _collected(out: str) -> int:
    return int(re.search(r"collected (\d+) items?", out).group(1))


def test_the_counts_add_up_whatever_deselects(pytester):
    """-k, and the other actions an action selection leaves out, are both "deselected" (by
    pytest's own hook), so collected = deselected + what ran, and nothing goes unreported."""
    res = inproc(pytester, "--duplexact-model=silent", "-k", "delayed",
                 "--duplexact-action=take_turn", "--duplexact-run-dir=r",
                 "-p", "no:cacheprovider")
    out = res.stdout.str()
    outcomes = res.parseoutcomes()
    others = len(ACTIONS) - 1  # one placeholder per action outside the selection
    assert outcomes.get("failed") == 3 and outcomes.get("deselected") == 6 + others, out
    assert _collected(out) == sum(outcomes.values()), out
    report = json.loads(Path(pytester.path, "r", "report.json").read_text())
    assert not [n for n in report["notes"] if "have no outcome" in n]  # nothing missing
    res = inproc(pytester, "--duplexact-model=silent",
                 "--duplexact-action=take_turn",
                 "--duplexact-condition=delayed", "--duplexact-run-dir=r2",
                 "-p", "no:cacheprovider")
    out = res.stdout.str()
    outcomes = res.parseoutcomes()
    assert outcomes == {"failed": 3, "deselected": others}, out
    assert _collected(out) == 3 + others, out
