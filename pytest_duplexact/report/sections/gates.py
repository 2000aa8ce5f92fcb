"""CI gates: ``wait.I>=0.9``, ``take_turn.delayed.I>=60%``, ``stop.T<=2.0``,
``take_turn.p90<=1.2``, ``stop.no_response<=5%``.

A gate names an action (optionally a condition), a metric (I, S, T = the action's timing
median in seconds, p10 / p50 / p90 = its latency distribution in seconds, no_response = the
rate of trials without substantive model speech) and a bound. A gate on something that was not measured fails and says why:
it never passes silently.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Callable

from ...data import taxonomy
from ...data.suggest import did_you_mean

SECONDS = ("T", "p10", "p50", "p90")  # metrics in seconds; the others are rates
LATENCY_TIMED = tuple(taxonomy.TIMING_DIAGNOSTIC) + ("take_turn", "backchannel")

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
}
_GATE = re.compile(
    r"^\s*(?P<action>[a-z_]+)(?:\.(?P<cond>[a-z_]+))?\.(?P<metric>I|S|T|p10|p50|p90|no_response)\s*"
    r"(?P<op>>=|<=|>|<)\s*(?P<value>-?[0-9]*\.?[0-9]+)\s*(?P<pct>%)?\s*$")


class GateError(ValueError):
    pass


@dataclass(frozen=True)
class Gate:
    expr: str
    action: str
    condition: str | None
    metric: str
    op: str
    threshold: float  # rates as fractions, T in seconds

    @property
    def target(self) -> str:
        where = self.action if self.condition is None else f"{self.action}.{self.condition}"
        return f"{where}.{self.metric}"


# The least value each timing diagnostic can take (its record's timing.minimum, from its
# rule's window): a bound below it is a typo, not a gate. Interrupt's has no such floor.
TIMING_MIN: dict[str, float] = {a: r.timing.minimum for a, r in taxonomy.RECORDS.items()
                                if r.timing is not None and r.timing.minimum is not None}


def parse(expr: str) -> Gate:
    m = _GATE.match(expr)
    if not m:
        raise GateError(f"cannot parse gate {expr!r}; expected e.g. 'wait.I>=0.9', "
                        "'take_turn.delayed.I>=60%', 'stop.T<=2.0', 'take_turn.p90<=1.2' or "
                        "'stop.no_response<=5%'")
    action, cond, metric = m["action"], m["cond"], m["metric"]
    if action not in taxonomy.ACTIONS:
        raise GateError(f"gate {expr!r}: unknown action {action!r}"
                        f"{did_you_mean(action, taxonomy.ACTIONS)}")
    if cond is not None:
        try:
            taxonomy.condition(action, cond)
        except KeyError as e:
            raise GateError(f"gate {expr!r}: {e.args[0]}") from None
    if metric == "T" and action not in taxonomy.TIMING_DIAGNOSTIC:
        raise GateError(f"gate {expr!r}: {action} has no timing diagnostic (only "
                        f"{', '.join(taxonomy.TIMING_DIAGNOSTIC)})")
    if metric in ("p10", "p50", "p90") and action not in LATENCY_TIMED:
        raise GateError(f"gate {expr!r}: {action} has no latency (only "
                        f"{', '.join(LATENCY_TIMED)})")
    value = float(m["value"])
    if m["pct"]:
        if metric in SECONDS:
            raise GateError(f"gate {expr!r}: a timing bound is in seconds, not %")
        value /= 100.0
    if metric not in SECONDS and not 0.0 <= value <= 1.0:
        raise GateError(f"gate {expr!r}: a rate bound must be in [0, 1] or [0%, 100%]")
    low = TIMING_MIN.get(action) if metric == "T" else None
    if low is not None and value < low:
        raise GateError(f"gate {expr!r}: {taxonomy.TIMING_DIAGNOSTIC[action]} is never below "
                        f"{low:g} s, so this gate could never "
                        f"{'pass' if m['op'].startswith('<') else 'fail'}")
    return Gate(expr.strip(), action, cond, metric, m["op"], value)


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    passed: bool
    value: float | None
    message: str

    def to_dict(self) -> dict:
        return {"gate": self.gate.expr, "target": self.gate.target, "passed": self.passed,
                "value": self.value, "threshold": self.gate.threshold, "op": self.gate.op,
                "message": self.message}


def _fmt(metric: str, v: float) -> str:
    return f"{v:.2f} s" if metric in SECONDS else f"{100 * v:.1f}%"


def evaluate(gate: Gate, lookup) -> GateResult:
    """``lookup(action, condition, metric) -> (value | None, why_missing)``."""
    value, why = lookup(gate.action, gate.condition, gate.metric)
    if value is None:
        return GateResult(gate, False, None, f"FAILED {gate.expr}: {gate.target} was not "
                          f"measured ({why})")
    ok = _OPS[gate.op](value, gate.threshold)
    got, want = _fmt(gate.metric, value), _fmt(gate.metric, gate.threshold)
    if ok:
        return GateResult(gate, True, value, f"passed {gate.expr}: {gate.target} = {got}")
    delta = value - gate.threshold
    by = f"{abs(delta):.2f} s" if gate.metric in SECONDS else f"{100 * abs(delta):.1f} points"
    return GateResult(gate, False, value, f"FAILED {gate.expr}: {gate.target} = {got}, "
                      f"needs {gate.op} {want} (off by {by})")
