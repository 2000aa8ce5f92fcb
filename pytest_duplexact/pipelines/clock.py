"""How late the harness itself was on the wall clock (docs/realtime.md "Timing
integrity"): a streaming trial is only as punctual as the event loop that paces its input and
stamps its output, so each trial measures its own lateness and says it.

* ``LoopMonitor``: one ticker per event loop, every ``TICK_S``; how late a tick wakes is a
  stall of the loop (a busy machine, a blocking call, another thread holding the GIL). It
  runs while at least one session watches it, and remembers the last second of stalls for
  admission control (run/prefetch.py, run/admission.py).
* ``Lateness``: one trial's three maxima, in seconds: input (a chunk sent after its slot),
  output (an event stamped after the loop was stalled: its stamp is late by about that
  much) and loop stall (any tick late while the trial streamed).
* ``TimingUnreliable``: a trial still over the tolerance after its re-runs (run/harness.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections import deque
from dataclasses import dataclass

from ..data.results import LAG_KEYS as _KEYS
from ..models.contract import ModelError

TICK_S = 0.010  # the ticker's period: a stall shorter than this is below what it can see
RECENT_S = 1.0  # admission control looks at the stalls of the last second


# The running trial's tolerance (s), set by the harness's guard (run/harness.py): a session
# that passes it stops at once (TrialLate) instead of streaming the rest of a trial that will
# not be scored. None: lateness is only recorded.
TOLERANCE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "duplexact_timing_tolerance", default=None)


@dataclass
class Lateness:
    """One trial's largest lateness of each kind so far (seconds)."""

    input: float = 0.0
    output: float = 0.0
    stall: float = 0.0

    @property
    def worst(self) -> float:
        return max(self.input, self.output, self.stall)

    def to_dict(self) -> dict:
        """The outcome's and recording's ``clock`` fields (ms, 0.1 ms resolution)."""
        return {k: round(v * 1000, 1) for k, v in zip(_KEYS, (self.input, self.output,
                                                              self.stall))}


def describe(clock: dict) -> str:
    """'input 240 ms late' / 'output ...' / 'event loop stalled ...': the worst of the three."""
    key = max(_KEYS, key=lambda k: float(clock.get(k) or 0.0))
    ms = float(clock.get(key) or 0.0)
    return {"input_lag_max_ms": f"input {ms:.0f} ms late",
            "output_lag_max_ms": f"output stamped {ms:.0f} ms late",
            "loop_stall_max_ms": f"event loop stalled {ms:.0f} ms"}[key]


class TrialLate(ModelError):
    """One attempt went over the tolerance (the guard runs it again): never scored."""

    def __init__(self, clock: dict):
        self.clock = clock
        super().__init__(f"{describe(clock)}: over the timing tolerance")


class TimingUnreliable(ModelError):
    """A streaming trial whose own lateness stayed over the tolerance after every re-run:
    an error of its own kind, never a pass or a miss (it enters no rate)."""

    def __init__(self, clock: dict, attempts: int):
        self.clock = clock
        super().__init__(f"timing unreliable: {describe(clock)} (over the tolerance on all "
                         f"{attempts} attempts); lower --duplexact-concurrency or free the "
                         "machine")


class LoopMonitor:
    """The ticker of one event loop (``of``), shared by the sessions streaming on it."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopMonitor]" = \
        weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop):
        # weakly: the registry's value must not keep its key alive (a serial run makes a new
        # loop per trial)
        self._loop = weakref.ref(loop)
        self._watchers: list[Lateness] = []
        self._task: asyncio.Task | None = None
        self.last_tick: float | None = None
        self.last_stall = 0.0  # how late the last tick ran
        self._recent: deque[tuple[float, float]] = deque()  # (tick time, stall)
        self._inputs: dict[int, float] = {}  # a watcher's input lag when last read

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        if loop is None:
            raise RuntimeError("the monitored event loop is gone")
        return loop

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop | None = None) -> "LoopMonitor":
        loop = loop or asyncio.get_running_loop()
        mon = cls._by_loop.get(loop)
        if mon is None:
            mon = cls._by_loop[loop] = cls(loop)
        return mon

    def watch(self, lateness: Lateness) -> None:
        self._watchers.append(lateness)
        if self._task is None or self._task.done():
            self.last_tick = self.loop.time()
            self._task = self.loop.create_task(self._run())

    def unwatch(self, lateness: Lateness) -> None:
        if lateness in self._watchers:
            self._watchers.remove(lateness)

    async def _run(self) -> None:
        while self._watchers:
            due = self.loop.time() + TICK_S
            await asyncio.sleep(TICK_S)
            self.tick(self.loop.time(), due)
        self.last_tick = None

    def tick(self, now: float, due: float) -> None:
        """A tick due at ``due`` ran at ``now`` (separate from the loop: tested on numbers)."""
        stall = max(0.0, now - due)
        self.last_tick, self.last_stall = now, stall
        self._recent.append((now, stall))
        while self._recent and self._recent[0][0] < now - RECENT_S:
            self._recent.popleft()
        for w in self._watchers:
            w.stall = max(w.stall, stall)

    def late(self, now: float) -> float:
        """How late something the loop handles at ``now`` may be (0 when the loop kept up, or
        when nothing is watched). An event that waited out a stall is handled either before
        the ticker's late wake-up (then the time since the last tick, beyond its period,
        is that stall so far) or just after it, in the same pass (then the stall that tick
        just measured). The second may overstate an event that arrived as the stall ended;
        never by more than the loop stall the trial records anyway."""
        if self.last_tick is None:
            return 0.0
        since = now - self.last_tick
        return self.last_stall if since < TICK_S else since - TICK_S

    def recent_stall(self) -> float:
        """The largest stall of the last ``RECENT_S`` (s); 0 when nothing streams here."""
        if not self._watchers:
            return 0.0
        now = self.loop.time()
        return max([s for t, s in self._recent if t >= now - RECENT_S] + [self.late(now)])

    def recent_lateness(self) -> float:
        """What admission control backs off on (run/admission.py): the recent stall, or an
        input lag a session reached since the last call (a chunk held back by a slow send as
        well as by a late loop), whichever is larger."""
        fresh, seen = 0.0, {}
        for w in self._watchers:
            seen[id(w)] = w.input
            if w.input > self._inputs.get(id(w), 0.0):
                fresh = max(fresh, w.input)
        self._inputs = seen
        return max(self.recent_stall(), fresh)
