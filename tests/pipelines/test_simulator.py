"""SimulatorReplay: the rule policy injects after enough continuous model speech; deadlines
force the cue; the cue's speech interval is recorded on the session clock."""

import numpy as np
import pytest

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.models.providers.silent import SilentModel
from pytest_duplexact.pipelines.policy import SimulatorState
from pytest_duplexact.pipelines.simulator import (
    MAX_WAIT_AFTER_SPEECH_S,
    MAX_WAIT_NO_SPEECH_S,
    OBSERVATION_S,
    RULE_MIN_SPEECH_S,
    RuleBasedSimulator,
    SimulatorReplay,
)
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, ScriptedModel, run, simulator_instance

LEAD_IN_END = 2.5  # the helper's lead-in clip length


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    return simulator_instance(tmp_path_factory.mktemp("sim"), "stop", "direct_interruption")


def _run(inst, model, policy=None, **kw):
    sim = SimulatorReplay(policy or RuleBasedSimulator(), **kw)
    return run(sim.run(SteppedDuplex(model, SessionInfo(inst)), inst))


def _injected(rec):
    return next(t for t, what in rec.events if what.startswith("cue_"))


def test_rule_injects_after_minimum_continuous_speech(inst):
    rec = _run(inst, ScriptedModel([(3.0, 9.0)]))
    t = _injected(rec)
    # speech from 3.0; the detector confirms it within 40 ms, pushes are 40 ms apart
    assert 3.0 + RULE_MIN_SPEECH_S <= t <= 3.0 + RULE_MIN_SPEECH_S + 0.2
    assert rec.cue.forced is False
    assert rec.cue.start == pytest.approx(t + 0.1) and rec.cue.end == pytest.approx(t + 1.6)
    cue_len = inst.clip("cue").duration
    assert rec.duration == pytest.approx(t + cue_len + OBSERVATION_S, abs=0.05)
    # the cue clip sits in the input right where it was recorded
    i = round(t * SR)
    np.testing.assert_allclose(rec.input[i: i + round(cue_len * SR)],
                               inst.clip("cue").load()[: round(cue_len * SR)], atol=1e-6)


def test_speech_with_short_gaps_is_continuous_but_a_long_pause_restarts(inst):
    # 0.2 s gaps (bridged) vs a 1.0 s pause at 4.0 s (restarts the stretch at 5.0)
    rec = _run(inst, ScriptedModel([(3.0, 3.5), (3.7, 4.0), (5.0, 9.0)]))
    assert 5.0 + RULE_MIN_SPEECH_S <= _injected(rec) <= 5.0 + RULE_MIN_SPEECH_S + 0.2


def test_silent_model_forces_the_cue_at_the_no_speech_deadline(inst):
    rec = _run(inst, SilentModel())
    assert rec.cue.forced is True
    assert _injected(rec) == pytest.approx(LEAD_IN_END + MAX_WAIT_NO_SPEECH_S, abs=0.041)
    assert rec.cue.start == pytest.approx(_injected(rec) + 0.1)


class Never:
    name, poll_interval = "never", 1.0

    def __init__(self):
        self.states: list[SimulatorState] = []

    def decide(self, state):
        self.states.append(state)
        return False


def test_policy_polled_every_interval_then_forced_after_speech_deadline(inst):
    words = [Word(3.0 + 0.3 * i, 3.2 + 0.3 * i, f"w{i}") for i in range(20)]
    policy = Never()
    rec = _run(inst, ScriptedModel([(3.0, 20.0)], words), policy)
    assert rec.cue.forced is True
    assert _injected(rec) == pytest.approx(3.0 + MAX_WAIT_AFTER_SPEECH_S, abs=0.09)
    times = [s.now for s in policy.states]
    assert len(times) == 8 and all(0.99 <= b - a <= 1.05 for a, b in zip(times, times[1:]))
    for s in policy.states:
        assert s.lead_in_end == pytest.approx(LEAD_IN_END)
        assert s.reference == inst.text("reference") and s.cue_text == inst.text("cue")
        assert s.condition.key == "stop.direct_interruption"
        heard = s.heard_transcript.split()
        assert heard and all(3.0 + 0.3 * int(w[1:]) <= s.now for w in heard)  # never ahead


def test_speech_during_lead_in_counts_from_lead_in_end(inst):
    rec = _run(inst, ScriptedModel([(1.0, 30.0)]), Never())
    assert _injected(rec) == pytest.approx(LEAD_IN_END + MAX_WAIT_AFTER_SPEECH_S, abs=0.05)


def test_model_that_stops_is_not_injected_into_silence(inst):
    # 1.0 s of speech only: never 1.5 s continuous -> forced at the speech deadline
    rec = _run(inst, ScriptedModel([(3.0, 4.0)]))
    assert rec.cue.forced is True
    assert _injected(rec) == pytest.approx(3.0 + MAX_WAIT_AFTER_SPEECH_S, abs=0.05)


def test_rule_policy_is_deterministic():
    pol = RuleBasedSimulator()
    base = dict(lead_in_end=2.0, heard_transcript="", reference="r", cue_text="c",
                condition=None)
    assert not pol.decide(SimulatorState(now=4.0, model_speaking=True, speaking_since=2.6,
                                         **base))
    assert pol.decide(SimulatorState(now=4.1, model_speaking=True, speaking_since=2.6, **base))
    assert not pol.decide(SimulatorState(now=9.0, model_speaking=False, speaking_since=2.6,
                                         **base))
    assert pol.name == "rule"
