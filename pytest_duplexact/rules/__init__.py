"""The rule-based scorers, one module per action (SPEC §3, §4 for stop, §5 timings).

Every function here is pure: (instance annotations, model timeline[, judge verdicts]) in,
a result out. No I/O, no globals.
"""

from . import backchannel, hold_floor, ignore, interrupt, recover, stop, take_turn, wait

RULES = {
    "wait": wait,
    "ignore": ignore,
    "take_turn": take_turn,
    "backchannel": backchannel,
    "stop": stop,
    "hold_floor": hold_floor,
    "interrupt": interrupt,
    "recover": recover,
}

__all__ = ["RULES"]
