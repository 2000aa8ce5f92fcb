"""What was said around a trial's instants, as text for the judge prompts: the user's words
selected by time, the model's speech before / after an instant. Pure: (instance, timeline) in,
strings out.

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

from typing import Callable, Sequence

from ..data.annotations import Instance
from ..data.timeline import MissingTranscript, Segment, Timeline, Word
from .common import EPS


class JudgeInputError(ValueError):
    """The instance lacks what a judge prompt needs (names the instance and the field)."""

    def __init__(self, instance: Instance, field: str, message: str):
        where = f"{instance.manifest}" + (f":{instance.line}" if instance.line else "")
        super().__init__(f"{where} [instance {instance.id}] field '{field}': {message}")
        self.instance_id, self.field = instance.id, field


def join(parts) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())


def segment_text(seg: Segment) -> str:
    if seg.text is None:
        raise MissingTranscript(seg)
    return seg.text


def segments_text(segments: Sequence[Segment]) -> str:
    return join(segment_text(s) for s in segments)


def split_segment(seg: Segment, t: float) -> tuple[str, str]:
    """(text before t, text from t on) of one segment: by its timed words (a word belongs to
    the side its start is on), else by word position in proportion to time."""
    text = segment_text(seg)
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


def user_words(inst: Instance) -> tuple[Word, ...]:
    clip = inst.clips.get("user")
    return clip.transcript if clip is not None else ()


def user_text(inst: Instance, keep: Callable[[Word], bool] | None = None,
              what: str = "") -> str:
    """User speech from the user clip's timed words (those ``keep`` accepts). With no timed
    words the whole ``text.user`` serves only when no selection is needed."""
    words = user_words(inst)
    if words:
        return join(w.text for w in words if keep is None or keep(w))
    if keep is None:
        return inst.text("user")
    raise JudgeInputError(inst, "audio.user.transcript",
                          f"timed words are needed to select {what}; add a transcript of "
                          "{start, end, text} words to the user clip")
