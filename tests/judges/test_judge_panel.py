"""JudgePanel, the harness's facade: every condition of the taxonomy, with a judge that
answers, without judges, and with a judge that cannot be reached."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from pytest_duplexact import rules
from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.results import Verdict, failure
from pytest_duplexact.data.timeline import Cue
from pytest_duplexact.judges import AudioJudge, JudgeClient, JudgePanel, RequestCache, prompts
from pytest_duplexact.judges.audio_judge import DEFAULT_MODEL as AUDIO_MODEL
from pytest_duplexact.rules.backchannel import Judgement
from pytest_duplexact.rules.scoring import subsequent
from tests.fakes import Content, JsonReply, Reply
from tests.judges.judgekit import FAST, immediate_of, trial
from tests.support.builders import seg, timeline

CONDITIONS = [(c.action, c.id) for c in taxonomy.CONDITIONS]
JUDGED = [ac for ac in CONDITIONS if ac[0] != "stop"]


@pytest.fixture
def panel(openai_server, fake_key, sleeps):
    return JudgePanel(JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps),
                      AudioJudge(base_url=openai_server.url, policy=FAST, sleep=sleeps))


def test_hand_made_trials_pass_immediate_execution():
    for action, cid in CONDITIONS:
        inst, tl = trial(action, cid)
        assert immediate_of(inst, tl).success, (action, cid)


@pytest.mark.parametrize("action,cid", JUDGED)
def test_judged_conditions_send_the_papers_prompt_and_map_yes_to_success(panel, openai_server,
                                                                         action, cid):
    inst, tl = trial(action, cid)
    openai_server.script(Reply("YES", "It keeps the thread."))
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.SUCCESS and out.judge == "gpt-5.4"
    assert out.reason == "judge: YES: It keeps the thread."
    fields = rules.RULES[action].judge_fields(rules.Trial(inst, tl), immediate_of(inst, tl))
    system, user = prompts.SUBSEQUENT[action].render(fields)
    (req,) = openai_server.chat_requests
    assert req.json["messages"] == [{"role": "system", "content": system},
                                    {"role": "user", "content": user}]
    assert out.evidence["fields"] == fields and out.evidence["answer"] == "YES"
    json.dumps(out.to_dict())  # report-ready


def test_no_maps_to_failure_with_the_judges_reason(panel, openai_server):
    inst, tl = trial("recover", "revise")
    openai_server.script(Reply("NO", "It resumes the old content."))
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.FAILURE and "resumes the old content" in out.reason


def test_stop_is_decided_by_rule_without_a_request(panel, openai_server):
    inst, tl = trial("stop", "direct_interruption")
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out == rules.stop.subsequent(tl, immediate_of(inst, tl))
    assert out.judge == "rule" and openai_server.count == 0


def test_failed_immediate_execution_is_not_evaluated(panel, openai_server):
    inst, tl = trial("take_turn", "immediate")
    out = subsequent(inst, tl, failure("late"), panel)
    assert out.verdict is Verdict.NOT_APPLICABLE and openai_server.count == 0


def test_hold_floor_without_speech_after_the_cue_is_not_applicable(panel, openai_server):
    inst, _ = trial("hold_floor", "continue")
    tl = timeline(seg(0.5, 4.0, "The museum opens at nine and"), cue=Cue(3.0, 4.0))
    assert not rules.hold_floor.has_speech_after_cue(tl)
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.NOT_APPLICABLE and openai_server.count == 0


@pytest.mark.parametrize("action,field", [("wait", "model_response"),
                                          ("backchannel", "model_later")])
def test_no_later_speech_is_a_rule_failure_where_the_paper_says_so(panel, openai_server,
                                                                   action, field):
    inst, tl = trial(action, taxonomy.conditions_of(action)[0].id)
    first = tl.segments[:1] if action == "backchannel" else ()
    tl = tl.with_segments(first)
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.FAILURE and out.judge == "rule"
    assert out.evidence["fields"][field] == "" and openai_server.count == 0


def test_a_panel_without_judges_marks_everything_but_stop_not_judged():
    panel = JudgePanel()
    for action, cid in CONDITIONS:
        inst, tl = trial(action, cid)
        out = subsequent(inst, tl, immediate_of(inst, tl), panel)
        expected = Verdict.SUCCESS if action == "stop" else Verdict.NOT_JUDGED
        assert out.verdict is expected, (action, cid)
    inst, tl = trial("backchannel", "affirmative")
    assert panel.backchannel_stages(inst, tl, tl.segments[0], np.zeros(10)) == \
        (Judgement(), Judgement())
    assert panel.stats()["models"] == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_judge_gives_judge_errors_with_counts_and_no_exception(fake_key, sleeps):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    panel = JudgePanel(JudgeClient(base_url=url, policy=FAST, sleep=sleeps),
                       AudioJudge(base_url=url, policy=FAST, sleep=sleeps))
    verdicts = {}
    for action, cid in CONDITIONS:
        inst, tl = trial(action, cid)
        verdicts[action, cid] = subsequent(inst, tl, immediate_of(inst, tl), panel)
    for (action, cid), out in verdicts.items():
        if action == "stop":
            assert out.verdict is Verdict.SUCCESS
        else:
            assert out.verdict is Verdict.JUDGE_ERROR, (action, cid)
            assert "connection error" in out.reason and out.judge == "gpt-5.4"
    inst, tl = trial("backchannel", "uncertainty")
    genuine, function = panel.backchannel_stages(inst, tl, tl.segments[0], np.ones(1600))
    assert genuine.error and function == Judgement()
    imm = rules.backchannel.immediate(inst.annotations, tl, "uncertainty", genuine, function)
    assert imm.verdict is Verdict.JUDGE_ERROR
    n = len(JUDGED) + 1
    stats = panel.stats()["text_judge"]
    assert stats["errors"] == n and stats["calls"] == n * FAST.max_attempts
    assert stats["retries"] == n * (FAST.max_attempts - 1)
    assert panel.stats()["audio_judge"]["calls"] == 0  # never asked about a failed stage 2
    # how the session tells a judge that is gone (it stops the run: session.LOST_AFTER)
    assert panel.unreachable() is panel.text and panel.text.endpoint_url == url
    assert panel.text.unreached == n
    panel.clear_unreached()  # as the next instance's scoring starts
    assert panel.unreachable() is None


def test_a_judge_that_answers_is_not_unreachable_even_when_the_answer_is_an_error(
        panel, openai_server):
    """Any answer resets the count of requests that could not connect: a 500 is a judge that
    is there and failing, which a retry or a resume may fix, not one that is gone."""
    from tests.fakes import Fail

    panel.text.unreached = 2  # as after two refused requests
    openai_server.script(*[Fail(500)] * FAST.max_attempts)
    inst, tl = trial("take_turn", "delayed")
    assert subsequent(inst, tl, immediate_of(inst, tl), panel).verdict is Verdict.JUDGE_ERROR
    assert panel.unreachable() is None and panel.text.unreached == 0


def test_one_judges_old_refusal_is_not_taken_for_the_other_judge_gone(openai_server, fake_key,
                                                                     sleeps):
    """The audio judge is asked only at backchannel stage 3: a refusal of its one request
    stayed on it while the text judge, answering 500s, failed the next instances, and those
    were taken for a judge that is gone (the run stopped, blaming the audio judge). The
    harness clears the panel as each instance's scoring starts."""
    from tests.fakes import Fail

    panel = JudgePanel(JudgeClient(base_url=openai_server.url, policy=FAST, sleep=sleeps),
                       AudioJudge(base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                                  policy=FAST, sleep=sleeps))
    inst, tl = trial("backchannel", "uncertainty")
    genuine, function = panel.backchannel_stages(inst, tl, tl.segments[0], np.ones(1600))
    assert genuine.value is True and function.error  # stage 3's judge refused
    assert panel.unreachable() is panel.audio
    panel.clear_unreached()  # the next instance
    openai_server.script(*[Fail(500)] * FAST.max_attempts)
    inst, tl = trial("take_turn", "delayed")
    assert subsequent(inst, tl, immediate_of(inst, tl), panel).verdict is Verdict.JUDGE_ERROR
    assert panel.unreachable() is None  # the text judge answered: not a judge gone


def test_an_unusable_answer_is_a_judge_error(panel, openai_server):
    inst, tl = trial("ignore", "background_speech")
    openai_server.script(*[JsonReply({"answer": "PARTLY", "reason": "?"})] * FAST.max_attempts)
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.JUDGE_ERROR and "PARTLY" in out.reason


# --- backchannel stages 2 and 3 -----------------------------------------------------------

def _bc(condition="affirmative"):
    inst, tl = trial("backchannel", condition)
    return inst, tl, tl.segments[0], 0.05 * np.ones(4800, np.float32)


@pytest.mark.parametrize("heard,expected", [("affirmative", Verdict.SUCCESS),
                                            ("uncertainty", Verdict.FAILURE)])
def test_stage_three_function_must_match_the_condition(panel, openai_server, heard, expected):
    inst, tl, cand, audio = _bc("affirmative")
    openai_server.script(Reply("YES", "A complete acknowledgement."),
                         JsonReply({"function": heard, "reason": "rising pitch"}))
    genuine, function = panel.backchannel_stages(inst, tl, cand, audio)
    assert genuine == Judgement(True, "A complete acknowledgement.")
    assert function == Judgement(heard, "rising pitch")
    imm = rules.backchannel.immediate(inst.annotations, tl, "affirmative", genuine, function)
    assert imm.verdict is expected

    text_req, audio_req = openai_server.chat_requests
    system, user = prompts.BACKCHANNEL_GENUINE.render(
        rules.backchannel.genuine_fields(inst, tl, cand))
    assert text_req.json["messages"][1]["content"] == user
    body = audio_req.json
    assert body["model"] == AUDIO_MODEL and body["modalities"] == ["text"]
    assert body["messages"][0] == {"role": "system", "content": prompts.AUDIO_FUNCTION_SYSTEM}
    text_part, audio_part = body["messages"][1]["content"]
    assert text_part == {"type": "text", "text": prompts.AUDIO_FUNCTION_USER}
    assert audio_part["type"] == "input_audio" and audio_part["input_audio"]["format"] == "wav"
    # audio only: neither the transcript nor the condition travels with it
    dumped = json.dumps(body["messages"])
    assert "mm-hmm" not in dumped and "Berlin" not in dumped
    assert body["response_format"]["json_schema"]["schema"] == prompts.AUDIO_FUNCTION_SCHEMA


def test_a_rejected_candidate_is_never_sent_to_the_audio_judge(panel, openai_server):
    inst, tl, cand, audio = _bc()
    openai_server.script(Reply("NO", "It is the start of a turn."))
    genuine, function = panel.backchannel_stages(inst, tl, cand, audio)
    assert genuine.value is False and function == Judgement()
    assert openai_server.count == 1
    imm = rules.backchannel.immediate(inst.annotations, tl, "affirmative", genuine, function)
    assert imm.verdict is Verdict.FAILURE


def test_without_an_audio_judge_stage_three_is_not_judged(openai_server, fake_key):
    panel = JudgePanel(JudgeClient(base_url=openai_server.url, policy=FAST))
    inst, tl, cand, audio = _bc()
    genuine, function = panel.backchannel_stages(inst, tl, cand, audio)
    assert genuine.value is True and function == Judgement()
    imm = rules.backchannel.immediate(inst.annotations, tl, "affirmative", genuine, function)
    assert imm.verdict is Verdict.NOT_JUDGED


def test_a_failing_audio_judge_is_a_judge_error(panel, openai_server):
    inst, tl, cand, audio = _bc()
    openai_server.script(Reply("YES", "ok"),
                         *[Content("affirmative")] * FAST.max_attempts)  # not JSON
    genuine, function = panel.backchannel_stages(inst, tl, cand, audio)
    assert genuine.value is True and function.error.startswith("audio judge gpt-audio-1.5")
    imm = rules.backchannel.immediate(inst.annotations, tl, "affirmative", genuine, function)
    assert imm.verdict is Verdict.JUDGE_ERROR


# --- stats and construction ---------------------------------------------------------------

def test_stats_report_models_calls_and_cache(openai_server, fake_key, tmp_path):
    cache = RequestCache(tmp_path / "c")
    panel = JudgePanel(JudgeClient(base_url=openai_server.url, policy=FAST),
                       AudioJudge(base_url=openai_server.url, policy=FAST), cache=cache)
    inst, tl = trial("interrupt", "help")
    for _ in range(2):
        subsequent(inst, tl, immediate_of(inst, tl), panel)
    s = panel.stats()
    assert s["models"] == ["gpt-5.4", "gpt-audio-1.5"]
    assert s["text_judge"]["calls"] == 1 and s["text_judge"]["cache_hits"] == 1
    assert s["audio_judge"]["requests"] == 0
    assert s["cache"]["writes"] == 1 and s["cache"]["hits"] == 1
    json.dumps(s)


def test_from_options_without_a_key_has_no_judges_and_says_why(tmp_path):
    panel = JudgePanel.from_options(cache_dir=tmp_path / "c")
    assert panel.text is None and panel.audio is None
    assert panel.stats()["notes"] == ["OPENAI_API_KEY is not set"]
    inst, tl = trial("wait", "continuous_speech")
    out = subsequent(inst, tl, immediate_of(inst, tl), panel)
    assert out.verdict is Verdict.NOT_JUDGED and "OPENAI_API_KEY is not set" in out.reason


def test_from_options_reads_values_then_environment(openai_server, fake_key, monkeypatch,
                                                    tmp_path):
    monkeypatch.setenv("DUPLEXACT_JUDGE_BASE_URL", openai_server.url)
    monkeypatch.setenv("DUPLEXACT_AUDIO_JUDGE_MODEL", "audio-from-env")
    panel = JudgePanel.from_options(judge_model="judge-x", cache_dir=tmp_path / "c",
                                    deadline=5, max_attempts=2)
    assert panel.text.base_url == openai_server.url
    assert panel.text.model == "judge-x" and panel.audio.model == "audio-from-env"
    assert panel.audio.base_url == openai_server.url  # falls back to the judge's URL
    assert panel.text.policy.max_attempts == 2 and panel.text.cache is panel.cache
    assert (panel.text.policy.deadline, panel.text.policy.timeout) == (5, 5)
    inst, tl = trial("take_turn", "delayed")
    assert subsequent(inst, tl, immediate_of(inst, tl), panel).verdict is Verdict.SUCCESS
    off = JudgePanel.from_options(audio_model="off", base_url=openai_server.url)
    assert off.audio is None and off.text is not None
    assert "audio judge turned off" in off.stats()["notes"]
