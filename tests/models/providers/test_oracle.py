"""The oracle performs every condition's expected action on hand-made instances: its
recordings pass every immediate rule that can decide alone (checked on an energy timeline)."""

from dataclasses import replace

import numpy as np
import pytest

from pytest_duplexact.data import audio, taxonomy
from pytest_duplexact.data.instance import Clip
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.data.timeline import Word
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.providers.oracle import (
    LEAD_IN_REPLY_S,
    REACTION_S,
    RECOVERY_AFTER_S,
    TAKE_TURN_ONSET_S,
)
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.rules import scoring
from tests.pipelines.helpers import (
    SR,
    cat,
    gap,
    instance_for,
    run,
    simulator_instance,
    spans,
    speech_in,
    timeline_of,
    tone,
)
from tests.support.builders import make_instance


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oracle")
    oracle = resolve_model("oracle")
    out = {}
    for cond in taxonomy.CONDITIONS:
        inst = instance_for(tmp, cond)
        out[cond.key] = (inst, run(run_instance(inst, oracle)))
    return out


@pytest.mark.parametrize("key", [c.key for c in taxonomy.CONDITIONS])
def test_immediate_success_on_every_condition(recordings, key):
    inst, rec = recordings[key]
    tl = timeline_of(rec)
    result = scoring.score(inst, tl).immediate
    if inst.action == "backchannel":  # stages 2-3 need judges; stage 1 must find it
        assert result.verdict is Verdict.NOT_JUDGED, result.reason
        assert result.evidence["candidate"]["text"] == "mm-hmm"
    else:
        assert result.verdict is Verdict.SUCCESS, result.reason


def test_silent_during_the_user_turn_where_it_must_wait(recordings):
    for key in ("wait.continuous_speech", "wait.inter_sentential_pause",
                "ignore.background_speech", "take_turn.delayed"):
        inst, rec = recordings[key]
        ann = inst.annotations
        assert speech_in(rec.output, ann.user_start, ann.user_end) == 0.0, key


@pytest.mark.parametrize("cond", ["immediate", "delayed", "slight_overlap"])
def test_take_turn_onsets(recordings, cond):
    inst, rec = recordings[f"take_turn.{cond}"]
    onset = spans(rec.output)[0][0]
    assert onset == pytest.approx(inst.annotations.user_end + TAKE_TURN_ONSET_S[cond], abs=0.03)


def test_stop_yields_quickly_and_stays_silent(recordings):
    inst, rec = recordings["stop.direct_interruption"]
    sp = spans(rec.output)
    assert len(sp) == 1
    assert 0 < sp[0][1] - rec.cue.start <= REACTION_S + 0.1


def test_hold_floor_keeps_speaking_past_the_cue(recordings):
    for cond in taxonomy.conditions_of("hold_floor"):
        inst, rec = recordings[cond.key]
        lo, hi = rec.cue.start, rec.cue.end + 1.0
        assert speech_in(rec.output, lo, hi) == pytest.approx(hi - lo, abs=0.05), cond.key


def test_recover_stops_then_recovers_after_the_cue(recordings):
    inst, rec = recordings["recover.wrap_up"]
    sp = spans(rec.output)
    assert len(sp) == 2
    assert sp[0][1] - rec.cue.start <= REACTION_S + 0.1
    assert sp[1][0] - rec.cue.end == pytest.approx(RECOVERY_AFTER_S, abs=0.1)
    assert "in short" in " ".join(w.text for w in rec.transcript)


def test_interrupt_at_the_target_takes_over(recordings):
    inst, rec = recordings["interrupt.help"]
    assert spans(rec.output)[0][0] == pytest.approx(inst.annotations.interrupt_target, abs=0.03)
    assert rec.user_sent_until < inst.annotations.user_end - 1.0


def test_stop_and_recover_work_on_noisy_input(tmp_path):
    """A recorded lead-in and cue over a -55 dBFS noise floor: the gate moves above it, so
    the ends of their speech (not of their clips) are heard on time."""
    inst = simulator_instance(tmp_path, "recover", "wrap_up")
    rng = np.random.default_rng(7)
    clips = dict(inst.clips)
    for role in ("lead_in", "cue"):
        x = clips[role].load()
        noisy = x + rng.normal(0, 10 ** (-55 / 20), len(x)).astype(np.float32)
        path = tmp_path / f"noisy-{role}.flac"
        audio.write(path, noisy)
        clips[role] = Clip(path, len(noisy) / SR, clips[role].transcript)
    noisy_inst = replace(inst, clips=clips)
    rec = run(run_instance(noisy_inst, resolve_model("oracle")))
    result = scoring.score(noisy_inst, timeline_of(rec)).immediate
    assert result.verdict is Verdict.SUCCESS, result.reason
    first, second = spans(rec.output)
    assert first[0] == pytest.approx(2.3 + LEAD_IN_REPLY_S, abs=0.03)  # lead-in speech ends 2.3
    assert first[1] - rec.cue.start <= REACTION_S + 0.1
    assert second[0] - rec.cue.end == pytest.approx(RECOVERY_AFTER_S, abs=0.05)


def test_a_sentence_pause_in_the_reference_does_not_split_the_turn(tmp_path):
    """"Of course. <0.35 s> The mountains ..." must stay one substantive segment."""
    ref = cat(gap(0.1), tone(0.5), gap(0.35), tone(2.0), gap(0.1))
    words = (Word(0.1, 0.35, "Of"), Word(0.35, 0.6, "course"), Word(0.95, 1.5, "the"),
             Word(1.5, 2.0, "mountains"), Word(2.0, 2.95, "are"))
    user = cat(gap(0.5), tone(2.0), gap(0.5))
    inst = make_instance(tmp_path, "take_turn", "immediate", {"user": user, "reference":
                         (ref, words)}, {"user_start": 0.5, "user_end": 2.5}, {"user": "a b"})
    rec = run(run_instance(inst, resolve_model("oracle")))
    tl = timeline_of(rec)
    assert len(tl.segments) == 1 and tl.segments[0].is_substantive
    assert [w.text for w in rec.transcript] == ["Of", "course", "the", "mountains", "are"]
    assert rec.transcript[2].start - rec.transcript[1].start == pytest.approx(0.4, abs=0.03)
    assert scoring.score(inst, tl).immediate.verdict is Verdict.SUCCESS
