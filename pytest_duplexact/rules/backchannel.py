"""Backchannel, immediate execution in three stages (SPEC §3, paper B.7).

1. The candidate is the first model segment with <= 3 words whose onset lies in
   [user_start, user_end] (this rule, pure).
2. A text judge confirms it is a genuine, self-contained listener signal.
3. An audio judge, given the audio only, classifies its function (affirmative / uncertainty).
Success iff 2 says genuine and 3's function equals the condition. Stages 2 and 3 arrive as
data (``Judgement``); absent judges make the result NOT_JUDGED, never a silent pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..data.annotations import Annotations, Instance
from ..data.results import ImmediateResult, SubsequentResult, Verdict, failure, success
from ..data.taxonomy import BACKCHANNEL_FUNCTION_ALIASES
from ..data.timeline import Segment, Timeline
from .action_rule import Requirements, Rule, Trial
from .common import fmt_window, inside
from .speech import segment_text, segments_text, user_text


def function_label(value: object) -> str:
    """A stage-3 label in the condition ids' spelling."""
    label = str(value).strip().lower()
    return BACKCHANNEL_FUNCTION_ALIASES.get(label, label)


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


def genuine_fields(inst: Instance, tl: Timeline, candidate: Segment) -> dict[str, str]:
    """Stage 2's prompt (ours): user speech up to the candidate's end, the candidate, and the
    model's next segment with the silence before it."""
    nxt = next((s for s in tl.segments if s.start >= candidate.end and s is not candidate),
               None)
    return {"user_before_and_overlap": user_text(inst, lambda w: w.start < candidate.end,
                                                 "the user speech before the candidate"),
            "candidate": segment_text(candidate),
            "model_next": segment_text(nxt) if nxt else "",
            "gap_to_next": f"{nxt.start - candidate.end:.2f} s" if nxt else ""}


def _no_audio(segment: Segment):
    import numpy as np  # only reached when no audio was given: the judge hears nothing

    return np.zeros(0, np.float32)


class Backchannel(Rule):
    action = "backchannel"
    _requirements = Requirements(
        clips=("user",),
        annotations=("user_start", "user_end", "backchannel_point"), texts=("user",),
        within_user=(("backchannel_point", "backchannel_point",
                      "must lie inside the user speech"),))

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        ann, tl = trial.annotations, trial.timeline
        cand = candidate(ann, tl)
        if cand is None:
            return immediate(ann, tl, trial.condition)
        audio = (trial.audio_of or _no_audio)(cand)
        genuine, function = judges.backchannel_stages(trial.instance, tl, cand, audio)
        return immediate(ann, tl, trial.condition, genuine, function)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.7 (subsequent): user speech before and overlapping the backchannel, user speech
        after it and before the model's later response (the first substantive segment after
        it, else the first segment), the backchannel, and all later model speech."""
        inst, tl = trial.instance, trial.timeline
        cand = candidate(inst.annotations, tl)
        if cand is None:
            return {"user_before_and_overlap": user_text(inst), "user_between": "",
                    "model_backchannel": "", "model_later": ""}
        later = [s for s in tl.segments if s.start >= cand.end and s is not cand]
        response = next((s for s in later if s.is_substantive), later[0] if later else None)
        until = response.start if response is not None else math.inf
        what = "the user speech around the backchannel"
        return {"user_before_and_overlap": user_text(inst, lambda w: w.start < cand.end, what),
                "user_between": user_text(inst, lambda w: cand.end <= w.start < until, what),
                "model_backchannel": segment_text(cand), "model_later": segments_text(later)}

    def without_judge(self, fields: dict[str, str]) -> SubsequentResult | None:
        if not fields["model_later"]:
            return SubsequentResult(Verdict.FAILURE, "no later model speech after the "
                                    "backchannel", judge="rule", evidence={"fields": fields})
        return None


RULE = Backchannel()
