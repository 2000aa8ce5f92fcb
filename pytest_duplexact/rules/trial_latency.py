"""Latency as a distribution and the no-response rate (docs/report-format.md): what one
trial contributes, as pure functions of (instance, timeline, the immediate result).

* ``onset_latency``: the actions timed by their onset rather than a diagnostic of their rule:
  take_turn, the onset the rule names (its qualifying one, else the one its failure reason
  names) after the user's end; backchannel, its candidate's onset after the annotated
  backchannel point (the user's start when there is none). stop, interrupt and recover are
  timed by their own diagnostic (``InstanceOutcome.timing``).
* ``responded``: any substantive model speech anywhere in the instance. A trial without is a
  *no response*, counted apart from a late one.
"""

from __future__ import annotations

from ..data.annotations import Instance
from ..data.results import ImmediateResult
from ..data.timeline import Timeline

ONSET_TIMED = ("take_turn", "backchannel")


def onset_latency(instance: Instance, imm: ImmediateResult | None) -> float | None:
    if imm is None or imm.onset is None or instance.action not in ONSET_TIMED:
        return None
    ann = instance.annotations
    if instance.action == "take_turn":
        ref = ann.user_end
    else:
        ref = ann.backchannel_point if ann.backchannel_point is not None else ann.user_start
    return None if ref is None else round(imm.onset - ref, 6)


def responded(tl: Timeline) -> bool:
    return any(s.is_substantive for s in tl.segments)
