"""The endpoint baseline: replies after 0.7 s of user silence, yields to barge-in, never
backchannels, says its bundled >= 5-word reply."""

import pytest

from pytest_duplexact.data.timeline import count_words
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.providers.endpoint import REACTION_S, SILENCE_S, response
from pytest_duplexact.pipelines import run_instance
from tests.pipelines.helpers import cat, direct_instance, gap, run, simulator_instance, spans, tone
from tests.support.builders import make_instance


def test_bundled_reply_has_speech_and_a_transcript():
    r = response()
    assert count_words(" ".join(w.text for w in r.words)) >= 5
    assert 2.0 < r.duration_of_speech < 6.0
    assert all(a.start <= b.start for a, b in zip(r.words, r.words[1:]))


def test_replies_after_the_silence_threshold(tmp_path):
    inst = direct_instance(tmp_path, "take_turn", "immediate")
    rec = run(run_instance(inst, resolve_model("endpoint")))
    sp = spans(rec.output)
    assert len(sp) == 1
    assert sp[0][0] == pytest.approx(inst.annotations.user_end + SILENCE_S, abs=0.03)
    assert " ".join(w.text for w in rec.transcript).startswith("Okay thanks")


def test_short_pause_gets_no_reply_long_pause_does(tmp_path):
    short = direct_instance(tmp_path, "wait", "inter_sentential_pause")  # 0.6 s pause
    rec = run(run_instance(short, resolve_model("endpoint")))
    assert spans(rec.output)[0][0] > short.annotations.user_end
    user = cat(gap(0.5), tone(1.5), gap(1.2), tone(1.5), gap(0.5))
    long = make_instance(tmp_path, "wait", "inter_sentential_pause",
                         {"user": user, "reference": tone(2.0)},
                         {"user_start": 0.5, "user_end": 4.7, "pause_start": 2.0,
                          "pause_end": 3.2}, {"user": "a b c"}, iid="long-pause")
    rec = run(run_instance(long, resolve_model("endpoint")))
    first = spans(rec.output)[0]
    assert first[0] == pytest.approx(2.0 + SILENCE_S, abs=0.03)  # answers inside the pause
    assert first[1] == pytest.approx(3.2 + REACTION_S, abs=0.05)  # and yields when it resumes


def test_never_backchannels(tmp_path):
    inst = direct_instance(tmp_path, "backchannel", "affirmative")
    rec = run(run_instance(inst, resolve_model("endpoint")))
    ann = inst.annotations
    assert all(a > ann.user_end for a, _ in spans(rec.output))


def test_barge_in_on_its_reply(tmp_path):
    inst = simulator_instance(tmp_path, "stop", "direct_interruption")
    rec = run(run_instance(inst, resolve_model("endpoint")))
    first, second = spans(rec.output)[:2]
    assert first[1] - rec.cue.start == pytest.approx(REACTION_S, abs=0.05)
    assert second[0] == pytest.approx(rec.cue.end + SILENCE_S, abs=0.03)


def test_options_from_the_command_line_are_coerced():
    m = resolve_model("endpoint", silence_s="1.2")
    assert m.silence_s == 1.2
    with pytest.raises(ValueError, match="silence_s must be > 0"):
        resolve_model("endpoint", silence_s="0")
    with pytest.raises(ValueError, match="does not accept these options"):
        resolve_model("endpoint", threshold="3")
