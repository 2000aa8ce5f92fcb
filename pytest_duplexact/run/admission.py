"""How many streaming trials may be in flight now: an AIMD controller, as TCP's congestion
window (docs/realtime.md, "Adaptive concurrency").

The prefetcher (prefetch.py) asks it every ``CONTROL_S`` with the harness's recent lateness
(the loop's stalls and new input lag of the last second, pipelines/clock.py) and the trials
in flight. Lateness above ``BACK_OFF_AT`` of the timing tolerance is the loop losing its
punctuality before a trial is late enough to be re-run: the cap is cut by ``DECREASE``, once
per ``HOLD_S`` (the lateness window must forget the stall that caused a cut before it may
cause another). Below ``HEADROOM_AT`` of the tolerance, while the cap is what holds trials
back, it grows: doubling up to the last cut (slow start), then by one per step. A trial
still late is re-run, the cap first lowered to ``requested >> attempt``
(``rerun``).

Pure: time and lateness are arguments, so the policy is tested on numbers
(tests/run/test_admission.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CONTROL_S = 0.25  # how often the prefetcher asks
BACK_OFF_AT = 0.5  # lateness over this share of the tolerance cuts the cap
HEADROOM_AT = 0.2  # ... under this share, with the cap binding, raises it
DECREASE = 0.75  # the cut: cap x this (TCP's 0.5 is too coarse for a few stalls)
HOLD_S = 1.0  # no second cut within this (clock.RECENT_S: the lateness window)
INITIAL_WINDOW = 32  # trials admitted at once before the loop has shown what it holds


@dataclass
class Aimd:
    """The in-flight cap for ``requested`` trials at a timing ``tolerance`` (s)."""

    requested: int
    tolerance: float
    cap: int = 0  # 0: min(requested, INITIAL_WINDOW)
    threshold: float = math.inf  # slow start below it (TCP's ssthresh): the last cut
    _cut_at: float = field(default=-math.inf, repr=False)
    _grown_at: float = field(default=-math.inf, repr=False)

    def __post_init__(self) -> None:
        if self.requested < 1 or self.tolerance <= 0:
            raise ValueError("requested must be >= 1 and tolerance > 0")
        if not self.cap:
            self.cap = min(self.requested, INITIAL_WINDOW)

    def observe(self, now: float, lateness: float, in_flight: int) -> int:
        """The cap after seeing ``lateness`` (s, the worst of the last second) with
        ``in_flight`` trials running at ``now`` (s, any monotonic clock)."""
        if lateness > BACK_OFF_AT * self.tolerance:
            if now - self._cut_at >= HOLD_S:
                self._cut(now, max(1, math.floor(self.cap * DECREASE)))
        elif (lateness <= HEADROOM_AT * self.tolerance and in_flight >= self.cap
              and now - self._cut_at >= HOLD_S and now - self._grown_at >= CONTROL_S):
            # slow start doubles up to the last cut; past it, one more per step
            grown = min(2 * self.cap, self.threshold) if self.cap < self.threshold \
                else self.cap + 1
            self.cap, self._grown_at = min(self.requested, int(grown)), now
        return self.cap

    def rerun(self, now: float, attempt: int) -> int:
        """Before a late trial's re-run ``attempt`` (1, 2, ...): at most ``requested``
        halved per attempt."""
        self._cut(now, max(1, min(self.cap, self.requested >> attempt)))
        return self.cap

    def _cut(self, now: float, cap: int) -> None:
        self.cap, self.threshold, self._cut_at = cap, cap, now


def sustained(caps: list[int]) -> dict | None:
    """``measured.concurrency``'s sustained figures from the cap each trial was admitted
    under: its median (p50, the lower middle of an even count) and its minimum."""
    if not caps:
        return None
    ordered = sorted(caps)
    return {"sustained_p50": ordered[(len(ordered) - 1) // 2], "sustained_min": ordered[0]}


def concurrency_measured(trials: list[dict]) -> dict | None:
    """``measured``'s figures from each trial's ``Prefetcher.measure`` (over the pytest
    processes of the run): ``concurrency`` (requested, per process; sustained p50 / min: the
    cap each trial's last attempt was admitted under) and the loop's CPU per second a session
    streamed (held a slot, every attempt's)."""
    if not trials:
        return None
    streamed = sum(t["stream_s"] for t in trials)
    cpu = sum(t["loop_cpu_s"] for t in trials)
    return {"concurrency": {"requested": max(t["requested"] for t in trials),
                            **sustained([t["cap"] for t in trials])},
            "loop_cpu_ms_per_stream_s": round(1000 * cpu / streamed, 1) if streamed else None}
