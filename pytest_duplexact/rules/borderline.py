"""Borderline immediate verdicts: would the verdict flip if the timeline were off by its
measured error?

One function over the ``ActionRule`` protocol, for every action alike: the action's own
``immediate`` is re-run on perturbed copies of the timeline, and the verdict is *borderline*
when any copy's verdict differs from it. The perturbations are what the timeline can get
wrong (docs/timeline.md, "Borderline verdicts"):

- every edge (a segment's onset or offset, a raw VAD span's edge, which hold_floor's gaps
  read) moved by ``taxonomy.BORDERLINE_EDGE_S`` earlier and later, one edge at a time; an
  instant shared by a segment and its raw span moves in both;
- every segment of 3 or 4 words (``BACKCHANNEL_MAX_WORDS`` and one more) read with one word
  more or one fewer, across the three-word line.

Only counted verdicts (success, failure) are checked; a perturbed verdict of any other kind
(excluded, not judged) is a flip too, since the rate would change. Judges are never asked
again: a backchannel candidate that stays the same segment gets the answers the original got
(``Recorder``); a different candidate gets none (not judged), a flip, since its verdict
would hang on answers nobody gave.

Pure: plain data in, plain data out, like the rules.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from ..data.results import ImmediateResult
from ..data.taxonomy import BACKCHANNEL_MAX_WORDS, BORDERLINE_EDGE_S
from ..data.timeline import MissingTranscript, Span, Timeline, count_words
from .action_rule import ActionRule, Trial
from .backchannel import Judgement


class Recorder:
    """Wraps the judges of the original evaluation and keeps each backchannel answer by the
    candidate's index in the timeline, so the perturbed evaluations replay them."""

    def __init__(self, judges, timeline: Timeline):
        self._judges, self._index = judges, {id(s): i for i, s in
                                             enumerate(timeline.segments)}
        self.answers: dict[int, Any] = {}

    def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
        answer = self._judges.backchannel_stages(instance, timeline, candidate,
                                                 candidate_audio)
        if id(candidate) in self._index:
            self.answers[self._index[id(candidate)]] = answer
        return answer


class _Replay:
    """The recorded answers for a candidate that is the same segment (by index); none for
    another one."""

    def __init__(self, answers: dict[int, Any], origin: dict[int, int]):
        self._answers, self._origin = answers, origin

    def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
        index = self._origin.get(id(candidate))
        return self._answers.get(index, (Judgement(), Judgement()))


def _edge_kinds(tl: Timeline) -> dict[float, str]:
    """Every edge instant of the timeline: "onset", "offset", or "edge" when it is both."""
    kinds: dict[float, str] = {}
    spans = [(s.start, s.end) for s in tl.segments] + [(s.start, s.end)
                                                       for s in (tl.speech or ())]
    for start, end in spans:
        for t, kind in ((start, "onset"), (end, "offset")):
            kinds[t] = kind if kinds.get(t, kind) == kind else "edge"
    return dict(sorted(kinds.items()))


def _moved(start: float, end: float, edge: float, to: float) -> tuple[float, float]:
    """[start, end] with every end point at ``edge`` moved to ``to``, never inverted."""
    if start == edge:
        start = min(to, end)
    if end == edge:
        end = max(to, start)
    return start, end


def _segment_at(tl: Timeline, edge: float) -> int | None:
    return next((i for i, s in enumerate(tl.segments) if edge in (s.start, s.end)), None)


def _with_words(text: str, n: int) -> str:
    """``text`` read as ``n`` words: one more (a word appended) or one fewer (the last
    dropped)."""
    if n > count_words(text):
        return f"{text} more"
    toks = text.split()
    while toks and count_words(" ".join(toks)) > n:
        toks.pop()
    return " ".join(toks)


def perturbations(tl: Timeline, edge_s: float = BORDERLINE_EDGE_S
                  ) -> Iterator[tuple[dict, Timeline, dict[int, int]]]:
    """(what moved, the perturbed timeline, id(new segment) -> its index in ``tl``)."""
    for edge, kind in _edge_kinds(tl).items():
        for shift in (-edge_s, edge_s):
            to = max(0.0, edge + shift)
            segs = [replace(s, **dict(zip(("start", "end"), _moved(s.start, s.end, edge, to))))
                    for s in tl.segments]
            speech = None if tl.speech is None else tuple(
                Span(*_moved(s.start, s.end, edge, to)) for s in tl.speech)
            moved = replace(tl, segments=tuple(segs), speech=speech)
            yield ({"edge": kind, "at": edge, "shift": shift, "segment": _segment_at(tl, edge)},
                   moved, {id(s): i for i, s in enumerate(segs)})
    for i, s in enumerate(tl.segments):
        if s.text is None:
            continue
        n = count_words(s.text)
        if n not in (BACKCHANNEL_MAX_WORDS, BACKCHANNEL_MAX_WORDS + 1):
            continue
        shift = 1 if n == BACKCHANNEL_MAX_WORDS else -1
        segs = list(tl.segments)
        segs[i] = replace(s, text=_with_words(s.text, n + shift))
        yield ({"edge": "words", "at": s.start, "shift": shift, "segment": i, "words": n},
               tl.with_segments(segs), {id(x): k for k, x in enumerate(segs)})


def flips(rule: ActionRule, trial: Trial, original: ImmediateResult,
          answers: dict[int, Any] | None = None,
          edge_s: float = BORDERLINE_EDGE_S) -> tuple[dict, ...] | None:
    """The perturbations that change ``original`` (the rule's verdict on ``trial``), each a
    dict of ``results.FLIP_KEYS`` (and ``words`` for a word count); () when none does; None
    for a verdict the rates do not count. ``answers``: a ``Recorder``'s, for the backchannel
    judges."""
    if not original.verdict.counted:
        return None
    out = []
    for what, tl, origin in perturbations(trial.timeline, edge_s):
        moved = Trial(trial.instance, tl, lambda seg: None)
        try:
            verdict = rule.immediate(moved, _Replay(answers or {}, origin)).verdict
        except MissingTranscript:  # a segment without text moved into play: no verdict
            continue
        if verdict is not original.verdict:
            out.append({**what, "verdict": verdict.value})
    return tuple(out)

