"""Helpers for the judge tests: a recognisable fake key, fast retries, clip-less instances
and one trial per action (builders: tests/support/builders.py; conftest only holds
fixtures)."""

from __future__ import annotations

from pathlib import Path

from pytest_duplexact.data.annotations import Clip, Instance
from pytest_duplexact.data.timeline import Cue, Timeline
from pytest_duplexact.judges import RetryPolicy
from tests.support.builders import make_instance, seg, timeline, words

FAKE_KEY = "sk-FAKE-duplexact-0d15ea5e-not-a-real-key"

# Small, fast retries: the tests count attempts, they do not wait for them. The attempt limit is
# long: a local reply never reaches it, however loaded the machine (a 0.5 s one did under
# load, turning a scripted reply into a timeout and a retry the test did not expect).
FAST = RetryPolicy(max_attempts=3, backoff_base=0.01, backoff_cap=0.02, retry_after_cap=0.05,
                   timeout=30.0)
# Where a test scripts a Hang, the attempt limit it waits out: short enough to keep the test
# short, two orders of magnitude above a local reply (milliseconds) so that on a loaded
# machine only the hang reaches it. A Hang of HANG_S outlasts any test: the fake server ends
# it when it stops.
HANG_TIMEOUT = 2.0
HANG_S = 120.0


class Sleeps(list):
    """A sleep() that records delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def judged_instance(action: str, condition: str, *, user_words=(), texts=None,
                    **ann) -> Instance:
    """An instance as the judges see it: texts and words only; its user clip is never read,
    and it sits at a manifest line, for the messages that name one."""
    clips = {"user": Clip(Path("/nonexistent/user.flac"), 20.0, tuple(user_words))}
    return make_instance(None, action, condition, clips, ann, texts,
                         iid=f"{action}-{condition}-1", manifest=Path("/data/instances.jsonl"),
                         line=7)


# --- one hand-made trial per action, where immediate execution succeeds --------------------

TABLE_WORDS = words(("I", 0.0, 0.2), ("need", 0.3, 0.6), ("a", 0.7, 0.8), ("table.", 0.9, 1.2),
                    ("For", 1.8, 2.0), ("four", 2.1, 2.4), ("people", 2.5, 2.8),
                    ("tonight.", 2.9, 3.3))
BERLIN = words(("So", 0.0, 0.2), ("I", 0.3, 0.4), ("moved", 0.5, 1.0), ("to", 1.2, 1.4),
               ("Berlin", 1.5, 2.0), ("last", 2.2, 2.5), ("year", 2.6, 3.0), ("and", 3.2, 3.4),
               ("love", 3.5, 3.8), ("it.", 3.9, 4.0))


def trial(action: str, condition: str) -> tuple[Instance, Timeline]:
    """A trial of ``action.condition`` whose immediate execution succeeds."""
    texts = {"user": "x", "cue": "Hang on a second.", "reference": "ref", "ignored": "grab it"}
    if action in ("wait", "take_turn"):
        extra = {"pause_start": 1.2, "pause_end": 1.8} if action == "wait" else {}
        inst = judged_instance(action, condition, user_words=TABLE_WORDS, texts=texts,
                             user_start=0.0, user_end=3.3, **extra)
        return inst, timeline(seg(3.4, 5.0, "Sure, a table for four people tonight."))
    if action == "ignore":
        inst = judged_instance(action, condition, user_words=TABLE_WORDS, texts=texts,
                             user_start=0.0, user_end=3.3, other_start=1.3, other_end=1.7)
        return inst, timeline(seg(3.6, 5.0, "Sure, a table for four people tonight."))
    if action == "backchannel":
        inst = judged_instance(action, condition, user_words=BERLIN, texts=texts,
                             user_start=0.0, user_end=4.0, backchannel_point=1.6)
        return inst, timeline(seg(1.5, 1.8, "mm-hmm"),
                              seg(4.3, 6.0, "That sounds like a great move."))
    if action == "interrupt":
        inst = judged_instance(action, condition, user_words=TABLE_WORDS, texts=texts,
                             user_start=0.0, user_end=6.0, interrupt_target=2.0)
        return inst, timeline(seg(2.0, 4.0, "Wait, that restaurant is closed tonight."),
                              user_sent_until=2.5)
    inst = judged_instance(action, condition, texts=texts, cue_start=0.0, cue_end=1.0)
    if action == "stop":
        return inst, timeline(seg(0.5, 2.5, "The museum opens at nine and"), duration=10.0,
                              cue=Cue(2.0, 4.0))
    if action == "hold_floor":
        return inst, timeline(seg(0.5, 6.0, "The museum opens at nine and closes at six."),
                              cue=Cue(3.0, 4.0))
    if action == "recover":
        return inst, timeline(seg(0.5, 4.5, "The museum opens at nine and closes"),
                              seg(6.0, 8.0, "Sure, it opens at nine."), cue=Cue(4.0, 5.5))
    raise KeyError(action)


def immediate_of(inst: Instance, tl: Timeline):
    """The real rule's immediate result (backchannel: as if both judges confirmed it)."""
    from pytest_duplexact import rules
    from pytest_duplexact.rules.backchannel import Judgement

    class Confirming:  # both backchannel judges say yes, of the condition's function
        def backchannel_stages(self, instance, timeline, candidate, candidate_audio):
            return Judgement(True, "ok"), Judgement(instance.condition, "ok")

    return rules.RULES[inst.action].immediate(rules.Trial(inst, tl), Confirming())
