"""The fields of each judge prompt, built from one trial. Pure: (instance, timeline) in, a
dict of strings out, named as the paper's templates name them (prompts.py).

Clocks. Direct Replay and barge-in stream the user clip from t = 0, so the user clip's timed
transcript and the annotations are already on the timeline's clock. Simulator Replay injects
the cue somewhere in the model's response: where, the timeline's ``cue`` says; its text is the
instance's ``text.cue``.

Splitting model speech at an instant (cue end, distractor end, cue start) uses the segment's
own timed words (``Segment.words``: native transcript or ASR words on the timeline clock) when
it has them; otherwise a segment that straddles the instant is cut by word position in
proportion to time (speech rate assumed even within one segment).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from .. import rules
from ..rules.common import EPS, onsets_in
from ..instance import Instance
from ..timeline import MissingTranscript, Segment, Timeline, Word
from .prompts import condition_id


class JudgeInputError(ValueError):
    """The instance lacks what a judge prompt needs (names the instance and the field)."""

    def __init__(self, instance: Instance, field: str, message: str):
        where = f"{instance.manifest}" + (f":{instance.line}" if instance.line else "")
        super().__init__(f"{where} [instance {instance.id}] field '{field}': {message}")
        self.instance_id, self.field = instance.id, field


def join(parts) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())


def _seg_text(seg: Segment) -> str:
    if seg.text is None:
        raise MissingTranscript(seg)
    return seg.text


def segments_text(segments: Sequence[Segment]) -> str:
    return join(_seg_text(s) for s in segments)


def split_segment(seg: Segment, t: float) -> tuple[str, str]:
    """(text before t, text from t on) of one segment: by its timed words (a word belongs to
    the side its start is on), else by word position in proportion to time."""
    text = _seg_text(seg)
    if t <= seg.start:
        return "", text
    if t >= seg.end:
        return text, ""
    if seg.words:
        return (join(w.text for w in seg.words if w.start < t),
                join(w.text for w in seg.words if w.start >= t))
    tokens = text.split()
    k = round(len(tokens) * (t - seg.start) / (seg.end - seg.start))
    return " ".join(tokens[:k]), " ".join(tokens[k:])


def model_before(tl: Timeline, t: float) -> str:
    """Model speech before instant t (a segment sounding at t contributes its first part)."""
    return join(split_segment(s, t)[0] for s in tl.segments if s.start < t)


def model_after(tl: Timeline, t: float) -> str:
    """Model speech from instant t on (a segment sounding at t contributes its last part)."""
    return join(split_segment(s, t)[1] for s in tl.segments if s.end > t)


def model_from(tl: Timeline, onset: float | None) -> str:
    """Whole segments starting at or after ``onset`` (none when there is no onset)."""
    if onset is None:
        return ""
    return segments_text([s for s in tl.segments if s.start >= onset - EPS])


def _user_words(inst: Instance) -> tuple[Word, ...]:
    clip = inst.clips.get("user")
    return clip.transcript if clip is not None else ()


def _user_text(inst: Instance, keep: Callable[[Word], bool] | None = None,
               what: str = "") -> str:
    """User speech from the user clip's timed words (those ``keep`` accepts). With no timed
    words the whole ``text.user`` serves only when no selection is needed."""
    words = _user_words(inst)
    if words:
        return join(w.text for w in words if keep is None or keep(w))
    if keep is None:
        return inst.text("user")
    raise JudgeInputError(inst, "audio.user.transcript",
                          f"timed words are needed to select {what}; add a transcript of "
                          "{start, end, text} words to the user clip")


# --- one builder per judged action --------------------------------------------------------

def wait(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.2: the user's speech during or after the wait interval (pause conditions: words
    ending after the pause starts; continuous speech: the whole turn) and the model's later
    response (segments starting once the wait interval is over)."""
    cond = inst.cond
    lo, hi = rules.wait.window(inst.annotations, cond.id)
    if cond.id == "continuous_speech":
        user = _user_text(inst)
    else:
        user = _user_text(inst, lambda w: w.end > lo, "the speech during or after the pause")
    return {"condition_id": condition_id(cond), "condition_context": cond.judge_context or "",
            "user_during_or_after_wait": user,
            "model_response": model_from(tl, hi)}


def take_turn(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.3: the user utterance and the model's response from its qualifying onset on."""
    imm = rules.take_turn.immediate(inst.annotations, tl, inst.condition)
    return {"condition_id": condition_id(inst.cond), "user_speech": _user_text(inst),
            "model_response": model_from(tl, imm.onset if imm.success else None)}


def ignore(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.8: addressed speech (user words outside the distractor interval), the ignored speech
    (``text.ignored``) and model speech after the distractor ended."""
    lo, hi = rules.ignore.window(inst.annotations)
    ignored = inst.text("ignored")
    if _user_words(inst):
        addressed = _user_text(inst, lambda w: w.end <= lo or w.start >= hi)
    else:  # text.user may or may not spell the distractor; never show it as addressed
        addressed = join(inst.text("user").split(ignored)) if ignored else inst.text("user")
    return {"addressed_user_speech": addressed, "ignored_speech": ignored,
            "model_response": model_after(tl, hi)}


def backchannel(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.7 (subsequent): user speech before and overlapping the backchannel, user speech after
    it and before the model's later response (the first substantive segment after it, else the
    first segment), the backchannel, and all later model speech."""
    cand = rules.backchannel.candidate(inst.annotations, tl)
    if cand is None:
        return {"user_before_and_overlap": _user_text(inst), "user_between": "",
                "model_backchannel": "", "model_later": ""}
    later = [s for s in tl.segments if s.start >= cand.end and s is not cand]
    response = next((s for s in later if s.is_substantive), later[0] if later else None)
    until = response.start if response is not None else math.inf
    what = "the user speech around the backchannel"
    return {"user_before_and_overlap": _user_text(inst, lambda w: w.start < cand.end, what),
            "user_between": _user_text(inst, lambda w: cand.end <= w.start < until, what),
            "model_backchannel": _seg_text(cand), "model_later": segments_text(later)}


def backchannel_genuine(inst: Instance, tl: Timeline, candidate: Segment) -> dict[str, str]:
    """Stage 2 (our prompt): user speech up to the candidate's end, the candidate, and the
    model's next segment with the silence before it."""
    nxt = next((s for s in tl.segments if s.start >= candidate.end and s is not candidate),
               None)
    return {"user_before_and_overlap": _user_text(inst, lambda w: w.start < candidate.end,
                                                  "the user speech before the candidate"),
            "candidate": _seg_text(candidate),
            "model_next": _seg_text(nxt) if nxt else "",
            "gap_to_next": f"{nxt.start - candidate.end:.2f} s" if nxt else ""}


def hold_floor(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.5: model speech before and during the cue / after cue offset, the cue's text and the
    condition's required adaptation. The human reference continuation is not given."""
    cond = inst.cond
    cue_end = tl.cue.end
    return {"condition_id": condition_id(cond), "required_adjustment": cond.judge_context or "",
            "cue": inst.text("cue"),
            "model_through_cue": model_before(tl, cue_end),
            "model_after_cue": model_after(tl, cue_end)}


def interrupt(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.6: what the user said (the part that was streamed when barge-in cut it short and the
    user clip has timed words, else the whole utterance) and the model's interruption from its
    qualifying onset on."""
    cond = inst.cond
    imm = rules.interrupt.immediate(inst.annotations, tl)
    sent = tl.user_sent_until if tl.user_sent_until is not None else math.inf
    if _user_words(inst):
        user = _user_text(inst, lambda w: w.start < sent)
    else:  # no timing to cut at: the whole utterance still says what was underway
        user = _user_text(inst)
    return {"condition_id": condition_id(cond), "condition_context": cond.judge_context or "",
            "user_speech": user,
            "model_interruption": model_from(tl, imm.onset if imm.success else None)}


def recover(inst: Instance, tl: Timeline) -> dict[str, str]:
    """B.9: the interrupted contribution (model speech before the cue started), the
    interruption (the cue's text) and the recovery (segments with onset in the recover
    window)."""
    lo, hi = rules.recover.window(tl)
    return {"interrupted_contribution": model_before(tl, tl.cue.start),
            "interruption": inst.text("cue"),
            "model_recovery": segments_text(onsets_in(tl.segments, lo, hi))}


BUILDERS: dict[str, Callable[..., dict[str, str]]] = {
    "wait": wait, "ignore": ignore, "take_turn": take_turn, "backchannel": backchannel,
    "hold_floor": hold_floor, "interrupt": interrupt, "recover": recover,
}
