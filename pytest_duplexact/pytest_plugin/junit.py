"""JUnit XML that CI dashboards read: each testcase carries flat, typed properties instead of
the outcome's Python repr, and the testsuite carries the run's rates.

The gates and the baseline decide the exit status, so the suite also says how each came out
(``duplexact.gate[<expr>]``, ``duplexact.baseline``, ``duplexact.passed``) and, when there is
any, one more testcase ``duplexact::gates`` fails when a gate or the baseline failed: a CI
test view then shows the failed job as failed, not green.

The outcome travels on ``user_properties`` (that is how pytest-xdist brings it to the
controller); once the controller has taken it, the blob is replaced by flat properties
before pytest's junitxml plugin writes the testcase.
"""

from __future__ import annotations

from typing import Any

FLAT_PREFIX = "duplexact."


def _num(v: Any) -> str:
    return f"{v:.4f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def flat_properties(outcome: dict) -> list[tuple[str, str]]:
    """``[(name, value)]`` for one instance's outcome dict (InstanceOutcome.to_dict)."""
    out = [(FLAT_PREFIX + k, str(outcome[k])) for k in ("id", "action", "condition",
                                                        "scenario", "source", "corpus")
           if outcome.get(k) is not None]
    imm, sub = outcome.get("immediate") or {}, outcome.get("subsequent") or {}
    out.append((FLAT_PREFIX + "verdict_I", imm.get("verdict", "error" if outcome.get("error")
                                                   else "none")))
    out.append((FLAT_PREFIX + "verdict_S", sub.get("verdict", "none")))
    if imm.get("onset") is not None:
        out.append((FLAT_PREFIX + "onset", _num(imm["onset"])))
    if imm.get("window") is not None:
        lo, hi = imm["window"]
        out.append((FLAT_PREFIX + "window", f"{_num(lo)}..{_num(hi)}"))
    if outcome.get("borderline") is not None:  # rules/borderline.py: what would flip I
        out.append((FLAT_PREFIX + "borderline", str(bool(outcome["borderline"])).lower()))
    if outcome.get("timing") is not None:
        out.append((FLAT_PREFIX + "timing", _num(outcome["timing"])))
    clock = outcome.get("clock")
    if clock:  # a wall-clock trial: the harness's own lateness (docs/realtime.md)
        from ..data.results import worst_lag_ms

        out += [(FLAT_PREFIX + "lag_ms", _num(worst_lag_ms(clock))),
                (FLAT_PREFIX + "reruns", str(clock.get("reruns", 0)))]
    reason = outcome.get("error") or (sub.get("reason") if sub.get("verdict") == "failure"
                                      else imm.get("reason"))
    if reason:
        out.append((FLAT_PREFIX + "reason", reason[:500]))
    if outcome.get("recording"):
        out.append((FLAT_PREFIX + "recording", outcome["recording"]))
    return out


def suite_properties(report) -> list[tuple[str, str]]:
    """The run's rates: ``duplexact.<action>.I`` and ``duplexact.<action>.<condition>.I`` (and
    S, T where measured), with totals. ``report``: a ``report.model.Report`` (or its dict)."""
    from ..report.stats import rate_of

    summary = report.summary
    out = [(FLAT_PREFIX + "model", str(report.model)),
           (FLAT_PREFIX + "instances", str(report.totals.instances)),
           (FLAT_PREFIX + "errors", str(report.totals.errors))]
    from ..report.sections.timing import properties

    out += properties(report.clock)
    for action in summary.actions:
        for name, counts in [(action, summary.counts(action))] + [
                (f"{action}.{c}", v) for c, v in summary.conditions(action).items()]:
            for metric in ("I", "S"):
                r = rate_of(counts, metric)
                if r.value is not None:
                    out.append((f"{FLAT_PREFIX}{name}.{metric}", _num(r.value)))
            if counts.get("borderline_I") is not None and counts.get("n_I"):
                out.append((f"{FLAT_PREFIX}{name}.borderline_I", str(counts["borderline_I"])))
        timing = summary.timing(action)
        if timing and timing.get("median") is not None:
            out.append((f"{FLAT_PREFIX}{action}.T", _num(timing["median"])))
    return out


def gate_properties(report) -> list[tuple[str, str]]:
    """Each gate's and the baseline's outcome: ``duplexact.gate[wait.I<0.5]`` = ``failed``
    with its ``.message``, ``duplexact.baseline`` = ``passed`` / ``failed`` with its
    ``.message``, and ``duplexact.passed``: whether the gates, the baseline and the instances
    (none errored) let the run pass, what its exit status says."""
    from ..report.builder import passed

    out = []
    for g in report.gate_list():
        name = f"{FLAT_PREFIX}gate[{g.gate}]"
        out += [(name, "passed" if g.passed else "failed"), (name + ".message", g.message)]
    b = report.baseline
    if b is not None:
        out += [(FLAT_PREFIX + "baseline", "passed" if b["passed"] else "failed"),
                (FLAT_PREFIX + "baseline.message", str(b.get("message", "")))]
    if out:
        out.append((FLAT_PREFIX + "passed", str(passed(report)).lower()))
    return out


GATES_NODEID = "duplexact::gates"


def gate_reports(report) -> list:
    """The ``duplexact::gates`` testcase's call and teardown reports (none when the run has
    neither a gate nor a baseline): failed, naming what failed, when a gate or the baseline
    failed; the instances keep their own testcases."""
    from _pytest.reports import TestReport

    failed = [g.message for g in report.gate_list() if not g.passed]
    b = report.baseline
    if b is not None and not b["passed"]:
        failed.append(str(b.get("message", "FAILED baseline")))
    if not report.gate_list() and b is None:
        return []
    props = gate_properties(report)
    loc = ("duplexact", None, "gates")
    call = TestReport(GATES_NODEID, loc, {}, "failed" if failed else "passed",
                      "\n".join(failed) if failed else None, "call",
                      user_properties=props)
    return [call, TestReport(GATES_NODEID, loc, {}, "passed", None, "teardown")]


def add_suite_properties(config, report) -> None:
    """Into the JUnit XML's testsuite, when --junitxml is on (pytest's own LogXML): the run's
    rates, each gate's and the baseline's outcome, and the ``duplexact::gates`` testcase."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest without it: the testcase properties still carry it all
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, value in suite_properties(report) + gate_properties(report):
        xml.add_global_property(name, value)
    try:
        for rep in gate_reports(report):
            xml.pytest_runtest_logreport(rep)
    except Exception as e:  # another pytest's LogXML: the properties above still say it
        xml.add_global_property(FLAT_PREFIX + "gates_testcase_error",
                                f"{type(e).__name__}: {e}")
