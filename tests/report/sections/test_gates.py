import pytest

from pytest_duplexact.report.sections import gates


def report_lookup(values):
    def get(action, condition, metric):
        key = f"{action}.{condition}.{metric}" if condition else f"{action}.{metric}"
        v = values.get(key)
        return (v, "") if v is not None else (None, "not measured in this test")
    return get


@pytest.mark.parametrize("expr,target,op,thr", [
    ("wait.I>=0.9", "wait.I", ">=", 0.9),
    ("take_turn.delayed.I>=60%", "take_turn.delayed.I", ">=", 0.6),
    ("stop.S >= 0.95", "stop.S", ">=", 0.95),
    ("stop.T<=2.0", "stop.T", "<=", 2.0),
    ("interrupt.T>-5", "interrupt.T", ">", -5.0),
])
def test_parse(expr, target, op, thr):
    g = gates.parse(expr)
    assert (g.target, g.op, g.threshold) == (target, op, pytest.approx(thr))


@pytest.mark.parametrize("expr,msg", [
    ("wait.X>=0.9", "cannot parse"),
    ("walk.I>=0.9", "unknown action"),
    ("take_turn.soon.I>=0.5", "unknown condition"),
    ("wait.T<=1", "no timing diagnostic"),
    ("wait.I>=1.5", "must be in [0, 1]"),
    ("stop.T<=20%", "in seconds"),
    ("stop.T<=-5", "yield_latency is never below 0 s, so this gate could never pass"),
    ("stop.T>=-0.5", "could never fail"),
    ("recover.T<=-3", "recovery_latency is never below -2 s"),
])
def test_parse_errors(expr, msg):
    with pytest.raises(gates.GateError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        gates.parse(expr)


def test_pass_fail_and_margin():
    look = report_lookup({"wait.I": 0.85, "stop.T": 1.5})
    r = gates.evaluate(gates.parse("wait.I>=0.9"), look)
    assert not r.passed and "85.0%" in r.message and "off by 5.0 points" in r.message
    r = gates.evaluate(gates.parse("wait.I>=0.85"), look)
    assert r.passed  # the boundary passes for >=
    r = gates.evaluate(gates.parse("wait.I>0.85"), look)
    assert not r.passed
    r = gates.evaluate(gates.parse("stop.T<=1.2"), look)
    assert not r.passed and "off by 0.30 s" in r.message


def test_unmeasured_rate_fails_and_says_why():
    r = gates.evaluate(gates.parse("backchannel.I>=0.0"), report_lookup({}))
    assert not r.passed and r.value is None
    assert "was not measured" in r.message and "not measured in this test" in r.message


def test_negative_timing_bounds_where_the_diagnostic_can_be_negative():
    assert gates.parse("interrupt.T>=-1.5").threshold == -1.5  # before the target
    assert gates.parse("recover.T<=-1").threshold == -1.0  # in the window's early part
