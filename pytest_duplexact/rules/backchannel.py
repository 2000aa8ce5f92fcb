"""Backchannel, immediate execution in three stages (SPEC §3, paper B.7).

1. The candidate is the first model segment with <= 3 words whose onset lies in
   [user_start, user_end] (this rule, pure).
2. A text judge confirms it is a genuine, self-contained listener signal.
3. An audio judge, given the audio only, classifies its function (affirmative / uncertainty).
Success iff 2 says genuine and 3's function equals the condition. Stages 2 and 3 arrive as
data (``Judgement``); absent judges make the result NOT_JUDGED, never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..instance import Annotations
from ..results import ImmediateResult, Verdict, failure, success
from ..timeline import Segment, Timeline
from .common import fmt_window


@dataclass(frozen=True)
class Judgement:
    """A stage-2 or stage-3 outcome: ``value`` is True/False for genuineness or a function
    label for stage 3; ``None`` with ``error`` set when the judge failed; ``None`` alone when
    no judge is configured."""

    value: object = None
    reason: str = ""
    error: str | None = None


def window(ann: Annotations) -> tuple[float, float]:
    return ann.user_start, ann.user_end


def candidate(ann: Annotations, tl: Timeline) -> Segment | None:
    lo, hi = window(ann)
    for s in tl.segments:  # sorted by onset
        if lo <= s.start <= hi and s.is_backchannel:
            return s
    return None


def immediate(ann: Annotations, tl: Timeline, condition: str,
              genuine: Judgement | None = None,
              function: Judgement | None = None) -> ImmediateResult:
    lo, hi = window(ann)
    cand = candidate(ann, tl)
    if cand is None:
        return failure(f"no model segment of <= 3 words starts inside the user speech "
                       f"{fmt_window(lo, hi)}", window=(lo, hi))
    ev = {"candidate": {"start": cand.start, "end": cand.end, "text": cand.text}}
    base = f"candidate {cand.describe()}"
    for stage, j in (("genuine", genuine), ("function", function)):
        if j is not None and j.error:
            return ImmediateResult(Verdict.JUDGE_ERROR, f"{base}; {stage} judge failed: "
                                   f"{j.error}", window=(lo, hi), onset=cand.start, evidence=ev)
    if genuine is None or genuine.value is None:
        return ImmediateResult(Verdict.NOT_JUDGED, f"{base}; stage 2 (genuine backchannel?) "
                               "not judged: no text judge configured", window=(lo, hi),
                               onset=cand.start, evidence=ev)
    ev["genuine"] = {"value": bool(genuine.value), "reason": genuine.reason}
    if not genuine.value:
        return failure(f"{base} is not a genuine backchannel: {genuine.reason}",
                       window=(lo, hi), onset=cand.start, evidence=ev)
    if function is None or function.value is None:
        return ImmediateResult(Verdict.NOT_JUDGED, f"{base} is a genuine backchannel; stage 3 "
                               "(function) not judged: no audio judge configured",
                               window=(lo, hi), onset=cand.start, evidence=ev)
    ev["function"] = {"value": function.value, "reason": function.reason}
    if function.value != condition:
        return failure(f"{base} functions as {function.value}, the condition asks for "
                       f"{condition}", window=(lo, hi), onset=cand.start, evidence=ev)
    return success(f"{base}: genuine {condition} backchannel", window=(lo, hi),
                   onset=cand.start, evidence=ev)
