"""LLMSimulator: the paper's LLM cue-timing policy, against the fake server."""

from __future__ import annotations

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.judges import ConfigError, RequestCache, prompts
from pytest_duplexact.pipelines.policy import SimulatorPolicy, SimulatorState
from pytest_duplexact.pipelines.simulator_llm import SIMULATOR_RETRY, LLMSimulator, simulator_fields
from tests.fakes import Content, Fail, Reply
from tests.judges.judgekit import FAST


def state(heard="The museum opens at nine and", speaking=True, now=4.0,
          cond=("hold_floor", "background_speech")) -> SimulatorState:
    return SimulatorState(now=now, lead_in_end=1.5, model_speaking=speaking,
                          speaking_since=2.0 if speaking else None, heard_transcript=heard,
                          reference="The museum opens at nine and closes at six.",
                          cue_text="Did you feed the cat?", condition=taxonomy.condition(*cond))


@pytest.fixture
def sim(openai_server, fake_key, sleeps):
    return LLMSimulator(base_url=openai_server.url, policy=FAST, sleep=sleeps)


def test_is_a_simulator_policy_polled_every_second(sim):
    policy: SimulatorPolicy = sim
    assert policy.poll_interval == 1.0 and policy.name == "llm:gpt-5.4"
    assert SIMULATOR_RETRY.max_attempts <= 2 and SIMULATOR_RETRY.timeout <= 10


def test_yes_injects_and_the_request_carries_heard_text_reference_and_cue(sim, openai_server):
    openai_server.script(Reply("YES", "Mid-sentence, enough context."))
    s = state()
    assert sim.decide(s) is True
    (req,) = openai_server.chat_requests
    system, user = prompts.SIMULATOR.render(simulator_fields(s))
    assert req.json["messages"] == [{"role": "system", "content": system},
                                    {"role": "user", "content": user}]
    assert "Model speech heard so far: The museum opens at nine and" in user
    assert "Reference response: The museum opens at nine and closes at six." in user
    assert "Cue: Did you feed the cat?" in user
    assert "Model speaking for: 2.0 s" in user
    assert "do not treat background speech as addressed input" in user  # condition context
    assert sim.decisions == [(4.0, True, "Mid-sentence, enough context.")]


def test_no_waits(sim, openai_server):
    openai_server.script(Reply("NO", "Just started."))
    assert sim.decide(state(heard="The")) is False


def test_silence_or_nothing_heard_needs_no_request(sim, openai_server):
    assert sim.decide(state(speaking=False)) is False
    assert sim.decide(state(heard="   ")) is False
    assert openai_server.count == 0


def test_errors_mean_not_now_and_are_counted(sim, openai_server):
    openai_server.script(*[Fail(503)] * FAST.max_attempts, *[Content("sure")] * FAST.max_attempts)
    assert sim.decide(state()) is False
    assert sim.decide(state(now=5.0)) is False
    assert sim.counters.errors == 2 and sim.counters.invalid_answers == FAST.max_attempts
    assert [d[1] for d in sim.decisions] == [None, None]


def test_decisions_are_cached_for_identical_polls(openai_server, fake_key, tmp_path):
    for _ in range(2):
        sim = LLMSimulator(base_url=openai_server.url, policy=FAST,
                           cache=RequestCache(tmp_path / "c"))
        assert sim.decide(state()) is True
    assert openai_server.count == 1


def test_model_falls_back_to_simulator_then_judge_environment(openai_server, fake_key,
                                                              monkeypatch):
    monkeypatch.setenv("DUPLEXACT_JUDGE_MODEL", "judge-m")
    assert LLMSimulator(base_url=openai_server.url).client.model == "judge-m"
    monkeypatch.setenv("DUPLEXACT_SIMULATOR_MODEL", "sim-m")
    assert LLMSimulator(base_url=openai_server.url).name == "llm:sim-m"


@pytest.mark.parametrize("cond", [c for c in taxonomy.CONDITIONS
                                  if c.pipeline is taxonomy.Pipeline.SIMULATOR])
def test_every_simulator_condition_renders(cond):
    _, user = prompts.SIMULATOR.render(simulator_fields(state(cond=(cond.action, cond.id))))
    assert f"Action: {cond.action}" in user and f"Condition: {cond.judge_key or cond.id}" in user


def test_from_options_as_the_harness_builds_it(openai_server, fake_key, tmp_path):
    sim = LLMSimulator.from_options(model="sim-x", base_url=openai_server.url,
                                    cache_dir=tmp_path / "c")
    assert sim.name == "llm:sim-x" and sim.client.cache is not None
    assert sim.decide(state()) is True


def test_from_options_without_a_key_is_a_configuration_error():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        LLMSimulator.from_options(model="sim-x", base_url="http://127.0.0.1:9/v1")
