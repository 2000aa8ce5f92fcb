"""The rule-based scorers, one module per action (SPEC §3, §4 for stop, §5 timings).

Each module's pure functions decide from (annotations, timeline[, judge verdicts]); its
``RULE`` object is the action's ``ActionRule`` (base.py): requirements, immediate, the rule
part of subsequent, timing and judge fields. ``RULES`` is the one table of them, one per
action of the taxonomy, so a new action's rule is its module here and nothing else;
``requires`` is what the loader (data/instance.py, a floor below) is given. No I/O, no
globals, no audio library.
"""

from importlib import import_module

from ..data.taxonomy import ACTIONS
from .action_rule import ActionRule, Requirements, Trial

# rules/<action>.py for every action, in the taxonomy's order (a missing module is an
# ImportError naming it; tests/rules/test_action_records.py checks each RULE's action).
RULES: dict[str, ActionRule] = {a: import_module(f"{__name__}.{a}").RULE for a in ACTIONS}


def requires(action: str, condition: str) -> Requirements:
    """What an instance of ``action.condition`` must carry (the action's rule says)."""
    return RULES[action].requires(condition)


__all__ = ["ActionRule", "RULES", "Requirements", "Trial", "requires"]
