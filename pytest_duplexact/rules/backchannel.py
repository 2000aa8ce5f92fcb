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
from .common import fmt_window, inside

# The paper's audio judge labels a function "affirmative" or "uncertain"; the condition id is
# "uncertainty". Accept either spelling, in any case.
_FUNCTION_ALIASES = {"uncertain": "uncertainty"}


def function_label(value: object) -> str:
    """A stage-3 label in the condition ids' spelling."""
    label = str(value).strip().lower()
    return _FUNCTION_ALIASES.get(label, label)


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
        if inside(s.start, lo, hi) and s.is_backchannel:
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
    kw = {"window": (lo, hi), "onset": cand.start, "evidence": ev}
    # Stage by stage: a later judge's state only matters once the earlier stage said "go on",
    # so a genuine NO is a failure even when the audio judge errored or was not asked.
    if genuine is not None and genuine.error:
        return ImmediateResult(Verdict.JUDGE_ERROR, f"{base}; stage 2 (genuine backchannel?) "
                               f"judge failed: {genuine.error}", **kw)
    if genuine is None or genuine.value is None:
        return ImmediateResult(Verdict.NOT_JUDGED, f"{base}; stage 2 (genuine backchannel?) "
                               "not judged: no text judge configured", **kw)
    ev["genuine"] = {"value": bool(genuine.value), "reason": genuine.reason}
    if not genuine.value:
        return failure(f"{base} is not a genuine backchannel: {genuine.reason}", **kw)
    if function is not None and function.error:
        return ImmediateResult(Verdict.JUDGE_ERROR, f"{base} is a genuine backchannel; stage 3 "
                               f"(function) judge failed: {function.error}", **kw)
    if function is None or function.value is None:
        return ImmediateResult(Verdict.NOT_JUDGED, f"{base} is a genuine backchannel; stage 3 "
                               "(function) not judged: no audio judge configured", **kw)
    label = function_label(function.value)
    ev["function"] = {"value": label, "reason": function.reason}
    if label != condition:
        return failure(f"{base} functions as {label}, the condition asks for {condition}", **kw)
    return success(f"{base}: genuine {condition} backchannel inside the user speech "
                   f"{fmt_window(lo, hi)}", **kw)
