"""A budget that stops a run cleanly (``--duplexact-max-cost=USD``, ``--duplexact-max-wall``).

Spend is measured, never predicted: the billed usage the instances reported so far (the
figures the report prices, spend/cost.py). Before each new trial starts, that spend plus what
the trials already in flight will cost (the mean measured cost of a trial, or the estimate's
upper bound per instance before any trial finished) must stay below the budget; otherwise no
new trial starts, the trials in flight finish and are scored, and the run ends incomplete,
resumable like a run stopped with Ctrl-C. So a run passes its budget by at most one trial.

The budget counts what *this invocation* spends: outcomes a resume reuses cost nothing again.
Under pytest-xdist the controller decides (it alone sees every worker's usage) and tells the
workers through a file in the run directory (``STOP_FILE``), which each checks before it
starts a trial.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from .estimate import hours

STOP_FILE = "budget-stop.json"  # in the run directory, while a stopped run's workers wind down

_NUMBER = r"(\d+(?:\.\d+)?)"
# hours, minutes, seconds: each at most once and in that order (``1m30m`` is no 31 minutes)
_DURATION = re.compile(rf"(?:{_NUMBER}\s*h)?\s*(?:{_NUMBER}\s*(?:min|m))?\s*"
                       rf"(?:{_NUMBER}\s*s)?", re.IGNORECASE)


class BudgetError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``45m``, ``2h``, ``1h30m``."""
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        m = _DURATION.fullmatch(raw)
        if not raw or m is None:
            twice = m is None and re.fullmatch(r"(?:\d+(?:\.\d+)?\s*(?:h|min|m|s)\s*)+", raw,
                                               re.IGNORECASE)
            raise BudgetError(f"expected a duration such as 90s, 45m, 2h or 1h30m, got "
                              f"{text!r}" + (" (each unit once, hours then minutes then "
                                             "seconds)" if twice else "")) from None
        value = sum(float(n) * unit for n, unit in zip(m.groups(), (3600, 60, 1)) if n)
    if not value > 0:
        raise BudgetError(f"a duration must be > 0, got {text!r}")
    if not math.isfinite(value):  # no limit is the option left out; inf is not JSON
        raise BudgetError(f"a duration must be finite, got {text!r}; leave the option out "
                          "for no limit")
    return value


@dataclass
class Budget:
    max_cost: float | None
    max_wall: float | None
    prices: dict
    trial_estimate: float = 0.0  # cost of one trial before any finished (the estimate's max)
    currency: str = "USD"
    started: float = field(default_factory=time.monotonic)
    spent: float = 0.0
    finished: int = 0
    stopped: str | None = None  # why no new trial starts (None: the budget holds)

    def __post_init__(self):
        # the caller names the flag
        if self.max_cost is not None and not self.max_cost > 0:
            raise BudgetError(f"a budget must be > 0, got {self.max_cost}")
        if self.max_cost is not None and not math.isfinite(self.max_cost):
            # report.json keeps the budget, and strict JSON has no Infinity
            raise BudgetError(f"a budget must be finite, got {self.max_cost}; leave the "
                              "option out for no budget")

    def record(self, usage_total: dict, finished: int) -> None:
        """The run's billed usage so far (data/usage.total) after ``finished`` trials."""
        from .cost import estimate

        self.spent = estimate(usage_total, self.prices)["total"]
        self.finished = finished

    @property
    def per_trial(self) -> float:
        return self.spent / self.finished if self.finished else self.trial_estimate

    def admits(self, in_flight: int, now: float | None = None) -> bool:
        """May one more trial start, with ``in_flight`` trials running? Once it says no it
        keeps saying no (``stopped`` holds why)."""
        if self.stopped is not None:
            return False
        elapsed = (time.monotonic() if now is None else now) - self.started
        if self.max_cost is not None:
            committed = self.spent + in_flight * self.per_trial
            if committed >= self.max_cost:
                self.stopped = (f"budget of {self.max_cost:.2f} {self.currency} reached: "
                                f"{self.spent:.4f} spent" + (
                                    f" + {in_flight} trial(s) in flight at about "
                                    f"{self.per_trial:.4f} each" if in_flight else ""))
                return False
        if self.max_wall is not None and elapsed >= self.max_wall:
            self.stopped = f"wall-time limit of {hours(self.max_wall)} reached"
            return False
        return True

    def to_dict(self) -> dict:
        return {"max_cost": self.max_cost, "max_wall_s": self.max_wall,
                "currency": self.currency, "spent": round(self.spent, 6),
                "stopped": self.stopped}

