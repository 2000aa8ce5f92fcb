"""The rule-based scorers, one module per action (SPEC §3, §4 for stop, §5 timings).

Each module's pure functions decide from (annotations, timeline[, judge verdicts]); its
``RULE`` object is the action's ``ActionRule`` (base.py): requirements, immediate, the rule
part of subsequent, timing and judge fields. ``RULES`` is the one table of them; ``requires``
is what the loader (data/instance.py, a floor below) is given. No I/O, no globals, no audio
library.
"""

from . import backchannel, hold_floor, ignore, interrupt, recover, stop, take_turn, wait
from .base import ActionRule, Requirements, Trial

RULES: dict[str, ActionRule] = {m.RULE.action: m.RULE for m in (
    wait, ignore, take_turn, backchannel, stop, hold_floor, interrupt, recover)}


def requires(action: str, condition: str) -> Requirements:
    """What an instance of ``action.condition`` must carry (the action's rule says)."""
    return RULES[action].requires(condition)


__all__ = ["ActionRule", "RULES", "Requirements", "Trial", "requires"]
