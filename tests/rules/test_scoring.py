"""rules/scoring.py holds the order of the stages ("the rule decides, else ask the judge"); the
judges come in as any object with the ``Judges`` methods, so scoring needs no judge package."""

from __future__ import annotations

from pathlib import Path

from pytest_duplexact.data.annotations import Clip, Instance
from pytest_duplexact.data.results import SubsequentResult, Verdict
from pytest_duplexact.data.timeline import Cue, Timeline
from pytest_duplexact.rules import RULES, Trial
from pytest_duplexact.rules.backchannel import Judgement
from pytest_duplexact.rules.scoring import score, subsequent
from tests.support.builders import make_instance, seg, timeline, words

USER = words(("I", 0.0, 0.2), ("need", 0.3, 0.6), ("a", 0.7, 0.8), ("table.", 0.9, 1.2))


def instance(action: str, condition: str, **ann) -> Instance:
    clips = {"user": Clip(Path("/nonexistent/user.flac"), 20.0, USER)}
    texts = {"user": "I need a table.", "cue": "Hang on.", "reference": "ref"}
    return make_instance(None, action, condition, clips, ann, texts,
                         iid=f"{action}-{condition}-1", manifest=Path("/d/instances.jsonl"),
                         line=1)


def take_turn(onset: float = 1.4) -> tuple[Instance, Timeline]:
    inst = instance("take_turn", "immediate", user_start=0.0, user_end=1.2)
    return inst, timeline(seg(onset, onset + 2.0, "Sure, a table for four people."),
                          duration=10.0)


class Recording:
    """A Judges that answers every prompt with one verdict and records what it was asked."""

    def __init__(self, missing: str | None = None):
        self.missing = missing
        self.asked: list[tuple[str, dict]] = []

    def missing_text_judge(self):
        return self.missing

    def ask_subsequent(self, action, fields):
        self.asked.append((action, fields))
        return SubsequentResult(Verdict.SUCCESS, "judge: YES: fine", judge="fake")

    def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
        return Judgement(), Judgement()


def test_the_judge_is_asked_once_with_the_rules_fields_when_the_rule_does_not_decide():
    inst, tl = take_turn()
    judges = Recording()
    s = score(inst, tl, judges)
    assert s.immediate.success and s.subsequent.judge == "fake"
    fields = RULES["take_turn"].judge_fields(Trial(inst, tl), s.immediate)
    assert judges.asked == [("take_turn", fields)]


def test_a_missing_judge_is_not_asked_and_its_reason_is_the_verdicts():
    inst, tl = take_turn()
    judges = Recording(missing="no text judge configured (OPENAI_API_KEY is not set)")
    s = score(inst, tl, judges)
    assert s.subsequent == SubsequentResult(Verdict.NOT_JUDGED, judges.missing)
    assert judges.asked == []


def test_without_judges_the_judged_stage_is_not_judged():
    inst, tl = take_turn()
    s = score(inst, tl)
    assert s.subsequent.verdict is Verdict.NOT_JUDGED
    assert s.subsequent.reason == "no text judge configured (--duplexact-judge)"


def test_a_rule_decided_subsequent_never_reaches_the_judge():
    inst = instance("stop", "direct_interruption", cue_start=0.0, cue_end=1.0)
    tl = timeline(seg(0.5, 2.5, "The museum opens at nine and"), duration=10.0, cue=Cue(2.0, 4.0))
    judges = Recording()
    s = score(inst, tl, judges)
    assert s.immediate.success and s.subsequent.judge == "rule"
    assert judges.asked == []


def test_a_failed_immediate_execution_asks_no_judge():
    inst, tl = take_turn(onset=5.0)  # far outside [0, 0.5] s of the user's end
    judges = Recording()
    s = score(inst, tl, judges)
    assert not s.immediate.success and s.subsequent is None and judges.asked == []
    assert subsequent(inst, tl, s.immediate, judges).verdict is Verdict.NOT_APPLICABLE
