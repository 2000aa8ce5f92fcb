"""report/model.py: the typed report reads any stored report.json and writes it back byte for
byte; sections a report lacks or keys this release does not know survive; the
pytest_duplexact_report hook adds to report.json."""

from __future__ import annotations

import json
import re
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from pytest_duplexact.report import VERSION, lookup
from pytest_duplexact.report.builder import Ran, Spent, base, build, passed
from pytest_duplexact.report.model import KEYS, Report, Summary, Totals
from pytest_duplexact.report.views import terminal
from pytest_duplexact.run.rundir import json_text
from pytest_duplexact.run.settings import RunSettings
from tests.report.helpers import mixed_report, outcomes_for, parsed, settings
from tests.support.inner_runs import run

RUN = ["--duplexact-model=silent", "--duplexact-condition=take_turn.immediate",
       "--duplexact-limit=1", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]

# the conftest.py docs/reports.md shows ("Adding to report.json"), run as printed there
REPORTS_MD = Path(__file__).resolve().parents[2] / "docs" / "reports.md"
HOOK = re.search(r"```python\n(# conftest\.py\n.*?)```", REPORTS_MD.read_text(encoding="utf-8"),
                 re.S).group(1)


def _report_of(pytester, *args) -> tuple[str, dict]:
    run(pytester, *RUN, "--duplexact-run-dir=run", *args, inprocess=True)
    text = (pytester.path / "run" / "report.json").read_text(encoding="utf-8")
    return text, json.loads(text)


def test_a_run_report_reads_back_and_writes_the_same_bytes(pytester):
    text, stored = _report_of(pytester)
    report = Report.from_json(stored)
    assert report.version == VERSION and report.run_dir == "."
    assert report.totals.instances == 1 and report.notes == ()
    assert report.summary.counts("take_turn")["n"] == 1
    assert json_text(report.to_json()) == text  # same keys, order and values
    assert list(report.to_json()) == [k for k in KEYS if k in stored]
    assert "extra" not in stored  # nothing added to it: the key is absent


def test_the_hook_adds_to_report_json(pytester, monkeypatch):
    monkeypatch.setenv("BUILD_ID", "42")
    pytester.makeconftest(HOOK)
    text, stored = _report_of(pytester)
    assert stored["extra"] == {"ci": {"build": "42", "instances": 1}}
    report = Report.from_json(stored)
    assert report.extra == stored["extra"] and list(report.to_json())[-1] == "extra"
    assert json_text(Report.from_json(stored).to_json()) == text


def test_a_hook_that_raises_fails_the_run_but_keeps_the_measured_report(pytester):
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_duplexact_report(report, config):\n"
        "    report.extra['half'] = 1\n"
        "    raise RuntimeError('no BUILD_ID')\n")
    args = [a.replace("take_turn.immediate", "wait.inter_sentential_pause") for a in RUN]
    result = pytester.runpytest(*args, "--duplexact-run-dir=run")
    result.assert_outcomes(passed=1)  # silence waits: the test is green...
    assert result.ret == 1  # ... and the hook's failure is the run's
    assert ("duplexact: ERROR: a pytest_duplexact_report hook raised RuntimeError: no "
            "BUILD_ID; report.json is written without what hooks add (extra), and the run "
            "fails") in result.stdout.str()
    stored = json.loads((pytester.path / "run" / "report.json").read_text(encoding="utf-8"))
    assert stored["totals"]["instances"] == 1 and "extra" not in stored


def test_the_hook_conftest_leaves_runs_without_the_plugin_alone(pytester):
    """The same conftest.py under ``-p no:duplexact`` (or where the plugin is not installed):
    pytest knows no such hook there, and must not refuse the project's other tests for it."""
    pytester.makeconftest(HOOK)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:duplexact", "-p", "no:cacheprovider", "-q")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)


def test_built_and_merged_shapes_round_trip():
    rep = mixed_report()
    back = Report.from_json(rep).to_json()
    assert back == rep and list(back) == list(rep)
    assert Report.from_json(rep).totals.errors == 1


def test_an_older_report_without_later_sections_is_read_and_rendered():
    rep = mixed_report()
    for key in ("selected", "gates", "taxonomy"):  # base's: notes are the run's
        del rep[key]
    report = Report.from_json(rep)
    assert report.selected is None and report.gates is None and report.notes is None
    assert report.to_json() == rep  # no section invented
    lines = terminal.render(parsed(report))
    assert lines[1].startswith("DuplexAct results for toy") and len(lines) > 10


def test_unknown_keys_are_kept_and_written_after_the_known_ones():
    rep = mixed_report()
    rep = {"future": {"x": 1}, **rep}
    back = Report.from_json(rep).to_json()
    assert back == rep and list(back)[-1] == "future"
    assert Report.from_json(rep)["future"] == {"x": 1}


def test_the_report_is_also_the_read_only_mapping_it_was():
    report = Report.from_json(mixed_report())
    assert report["totals"]["errors"] == 1 and report.get("usage") is None
    assert "usage" not in report and "summary" in report
    with pytest.raises(KeyError):
        report["usage"]
    with pytest.raises(FrozenInstanceError):
        report.model = "other"  # frozen: the numbers are the run's
    assert Report.from_json(report) is report


def test_build_is_the_base_report_plus_the_run_sections():
    from pytest_duplexact.report.sections.gates import parse

    outs = outcomes_for("wait.inter_sentential_pause", 6, 5)
    run = RunSettings.from_dict(settings())
    report = build(Ran(outs, run, "toy"), Spent(budget={"max_cost": 1.0}),
                   gates=[parse("wait.I>=0.9")], notes=["a note"])
    plain = base(Ran(outs, run, "toy")).to_json()
    got = report.to_json()
    assert {k: v for k, v in got.items() if k not in ("created", "gates", "notes", "budget")} \
        == {k: v for k, v in plain.items() if k not in ("created", "gates")}
    assert list(got) == [k for k in KEYS if k in got]
    assert got["gates"][0]["passed"] is False and got["notes"] == ["a note"]
    assert report.gates[0].message.startswith("FAILED wait.I>=0.9")
    assert not passed(report)  # 5 of 6 < 90%
    assert lookup(parsed(report))("wait", None, "I")[0] == pytest.approx(5 / 6)
    assert isinstance(report.summary, Summary) and report.summary.corpora == {}


@pytest.mark.parametrize("added, written, changed", [
    ("np.int64(5)", 5, "numpy values as plain numbers and lists"),
    ("np.arange(3)", [0, 1, 2], "numpy values as plain numbers and lists"),
    ("{'b', 'a'}", ["a", "b"], "sets as sorted lists"),
    ("{1: 'one', (2, 3): 'pair'}", {"1": "one", "(2, 3)": "pair"},
     "keys that are not strings as strings"),
    ("[float('nan'), float('inf'), 1.5]", [None, None, 1.5], "NaN and infinity as null"),
    ("ValueError(2)", "ValueError(2)", "other values (ValueError) as their repr"),
])
def test_extra_that_is_not_strict_json_is_written_json_safe_with_a_note(pytester, added,
                                                                       written, changed):
    """report.json is always written, and always strict JSON (issue 32 item 6)."""
    pytester.makeconftest(
        "import numpy as np\nimport pytest\n\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_duplexact_report(report, config):\n"
        f"    report.extra['x'] = {added}\n")
    args = [a.replace("take_turn.immediate", "wait.inter_sentential_pause") for a in RUN]
    result = pytester.runpytest(*args, "--duplexact-run-dir=run")
    assert result.ret == 0, result.stdout.str()
    text = (pytester.path / "run" / "report.json").read_text(encoding="utf-8")
    stored = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert stored["extra"] == {"x": written}
    assert any(changed in n for n in stored["notes"]), stored["notes"]
    assert f"duplexact: WARNING: extra (a pytest_duplexact_report hook's) was not strict " \
           f"JSON; written with {changed}" in result.stdout.str()


@pytest.mark.parametrize("raises, name, status", [
    ("pytest.fail('no BUILD_ID')", "Failed: no BUILD_ID", 1),
    ("sys.exit(3)", "SystemExit: 3", 1),
    ("raise KeyboardInterrupt", "KeyboardInterrupt: ", 2),
])
def test_a_hook_that_fails_exits_or_is_interrupted_still_leaves_report_json(pytester, raises,
                                                                          name, status):
    pytester.makeconftest(
        "import sys\nimport pytest\n\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_duplexact_report(report, config):\n"
        "    report.extra['half'] = 1\n"
        f"    {raises}\n")
    args = [a.replace("take_turn.immediate", "wait.inter_sentential_pause") for a in RUN]
    result = pytester.runpytest_subprocess(*args, "--duplexact-run-dir=run", timeout=300)
    assert result.ret == status, result.stdout.str()
    assert (f"duplexact: ERROR: a pytest_duplexact_report hook raised {name}; report.json is "
            "written without what hooks add (extra)") in result.stdout.str()
    stored = json.loads((pytester.path / "run" / "report.json").read_text(encoding="utf-8"))
    assert stored["totals"]["instances"] == 1 and "extra" not in stored


def test_the_base_report_is_built_typed_and_reads_back_as_itself():
    """No dict first: ``base`` makes the typed sections, and report.json's form of them
    parses back to the same report."""
    outs = outcomes_for("wait.inter_sentential_pause", 4, 3)
    report = base(Ran(outs, RunSettings.from_dict(settings()), "toy", selected=["zz", "a"]))
    assert isinstance(report.totals, Totals) and isinstance(report.summary, Summary)
    assert report.selected == tuple(sorted({"zz", "a"}))
    assert report.instances == tuple(o.to_dict() for o in sorted(outs, key=lambda o: o.id))
    text = json.dumps(report.to_json())
    assert json.dumps(Report.from_json(json.loads(text)).to_json()) == text
