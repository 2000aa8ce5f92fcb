"""BargeInReplay: a takeover stops the user audio; a backchannel does not."""

import numpy as np
import pytest

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines.bargein import OBSERVATION_S, TAKEOVER_MIN_SPEECH_S, BargeInReplay
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, ScriptedModel, direct_instance, run


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    return direct_instance(tmp_path_factory.mktemp("bi"), "interrupt", "help")


def _run(inst, model):
    return run(BargeInReplay().run(SteppedDuplex(model, SessionInfo(inst)), inst))


def test_takeover_stops_the_user_audio(inst):
    user = inst.clip("user").load()
    rec = _run(inst, ScriptedModel([(2.0, 6.0)]))
    cut = rec.user_sent_until
    assert 2.0 + TAKEOVER_MIN_SPEECH_S <= cut <= 2.0 + TAKEOVER_MIN_SPEECH_S + 0.1
    i = round(cut * SR)
    np.testing.assert_array_equal(rec.input[:i], user[:i])
    assert not rec.input[i:].any()
    assert rec.duration == pytest.approx(len(user) / SR + OBSERVATION_S)
    assert any(what.startswith("takeover") for _, what in rec.events)


def test_backchannel_is_not_a_takeover(inst):
    user = inst.clip("user").load()
    rec = _run(inst, ScriptedModel([(2.0, 2.4), (4.0, 4.5)],
                                   [Word(2.0, 2.4, "mm-hmm"), Word(4.0, 4.5, "yeah right")]))
    assert rec.user_sent_until == pytest.approx(len(user) / SR)
    np.testing.assert_array_equal(rec.input[: len(user)], user)


def test_more_than_three_words_is_a_takeover_even_when_short(inst):
    words = [Word(3.0 + 0.1 * i, 3.1 + 0.1 * i, w) for i, w in enumerate("no wait stop now".split())]
    rec = _run(inst, ScriptedModel([(3.0, 3.6)], words))
    assert 3.3 <= rec.user_sent_until <= 3.4  # when the fourth word has been heard


# ---- branches (released data: branch_acknowledged / branch_ignored, our reading) ----------

@pytest.fixture(scope="module")
def branched(tmp_path_factory, inst):
    from dataclasses import replace

    from pytest_duplexact.data.instance import Clip
    from tests.pipelines.helpers import tone

    tmp = tmp_path_factory.mktemp("branches")
    clips = dict(inst.clips)
    for role, freq, secs in (("branch_acknowledged", 330.0, 1.5), ("branch_ignored", 440.0, 2.0)):
        from pytest_duplexact.data import audio

        audio.write(tmp / f"{role}.flac", tone(secs, freq))
        clips[role] = Clip(tmp / f"{role}.flac", secs)
    return replace(inst, clips=clips)


def _run_b(inst, model, branches=True):
    return run(BargeInReplay(branches=branches).run(SteppedDuplex(model, SessionInfo(inst)), inst))


def test_takeover_plays_the_acknowledged_branch(branched):
    user = branched.clip("user").load()
    ack = branched.clip("branch_acknowledged").load()
    rec = _run_b(branched, ScriptedModel([(2.0, 6.0)]))
    i = round(rec.user_sent_until * SR)
    assert 2.0 + TAKEOVER_MIN_SPEECH_S <= rec.user_sent_until <= 2.0 + TAKEOVER_MIN_SPEECH_S + 0.1
    np.testing.assert_array_equal(rec.input[:i], user[:i])
    np.testing.assert_allclose(rec.input[i: i + len(ack)], ack)  # the user yields
    assert not rec.input[i + len(ack):].any()
    assert rec.duration == pytest.approx(i / SR + len(ack) / SR + OBSERVATION_S)
    assert [w for _, w in rec.events if "branch" in w] == ["branch_acknowledged: the user yields"]


def test_no_takeover_continues_with_the_ignored_branch(branched):
    user = branched.clip("user").load()
    ign = branched.clip("branch_ignored").load()
    rec = _run_b(branched, ScriptedModel([]))
    np.testing.assert_array_equal(rec.input[: len(user)], user)
    np.testing.assert_allclose(rec.input[len(user): len(user) + len(ign)], ign)
    assert rec.user_sent_until == pytest.approx((len(user) + len(ign)) / SR)


def test_branches_off_is_the_plain_replay(branched, inst):
    plain = _run(inst, ScriptedModel([(2.0, 6.0)]))
    off = _run_b(branched, ScriptedModel([(2.0, 6.0)]), branches=False)
    np.testing.assert_array_equal(off.input, plain.input)
    assert off.user_sent_until == plain.user_sent_until
