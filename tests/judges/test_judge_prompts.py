"""The judge prompts: verbatim Appendix B text (compared with the paper's prompts kept in
tests/golden/paper/appendix_b_prompts.txt), condition contexts from the taxonomy, and the
rendered prompts pinned by golden files (tests/golden/prompts/<name>.txt).

Regenerate the golden files after a deliberate prompt change with
``DUPLEXACT_UPDATE_GOLDEN=1 python -m pytest tests/judges/test_judge_prompts.py`` and read the
diff against the paper before committing it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.judges import prompts
from pytest_duplexact.pipelines.simulator_llm import cue_purpose

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "prompts"
# The paper's Appendix B prompt texts, kept in the repository so these checks never skip.
APPENDIX_B = Path(__file__).resolve().parents[1] / "golden" / "paper" / "appendix_b_prompts.txt"
# The paper's full text (its PDF's text extraction), where a machine has it: only to check
# the copy above against it.
PAPER_ENV = "DUPLEXACT_PAPER_TEXT"


def _paper_text() -> str:
    """Appendix B's prompts as the paper prints them (one section a line)."""
    return APPENDIX_B.read_text(encoding="utf-8")


def _sections() -> list[str]:
    return [ln for ln in _paper_text().splitlines() if ln.startswith("Exact ")]


def test_the_appendix_b_copy_holds_every_judged_action_once():
    heads = [ln for ln in _paper_text().splitlines() if ln.startswith("## B.")]
    assert [h.split(" ", 2)[2] for h in heads] == [
        "Wait", "Take Turn", "Hold Floor", "Interrupt", "Backchannel", "Ignore", "Recover"]
    assert len(_sections()) == len(heads) == len(prompts.SUBSEQUENT)


def test_the_appendix_b_copy_is_the_papers_text():
    """Where the paper's text is at hand: the golden copy is verbatim from it."""
    path = Path(os.environ.get(PAPER_ENV, ""))
    if not os.environ.get(PAPER_ENV) or not path.is_file():
        pytest.skip(f"{PAPER_ENV} does not name the paper's text file; the prompt checks use "
                    f"the copy in {APPENDIX_B.name} all the same")
    # page numbers and running heads the extraction put inside the prompts
    paper = re.sub(r" \d+ Preprint", "", path.read_text(encoding="utf-8"))
    for section in _sections():
        assert section in paper, section[:80]


# Sentences copied by hand from Appendix B (with the JSON braces the extraction dropped).
VERBATIM = {
    "wait": ["You will be shown the wait condition, the user’s speech during or after that wait "
             "interval, and the model’s later response.",
             "Complete uptake of every detail is not required."],
    "take_turn": ["If the evidence is ambiguous, insufficient, or the model produced no relevant "
                  "speech, answer NO.",
                  "it uses (does not ignore or contradict) the facts, limits, and revisions in "
                  "that speech."],
    "hold_floor": ["Answer YES if it keeps the same thread and does what the condition asked "
                   "(keep going, shorten, simplify, or ignore a distractor)."],
    "interrupt": ["Did this interruption do the work this condition required, rather than merely "
                  "announcing that an interruption is happening?"],
    "backchannel": ["Is the model’s later speech consistent with the understanding or stance "
                    "displayed in its backchannel?"],
    "ignore": ["the model’s speech (already restricted to after that other speech ended).",
               "no quoting, echoing, answering, or treating it as a fact or task."],
    "recover": ["Answer NO if it ignores the interruption, adjusts incorrectly, or resumes "
                "obsolete content as if the interruption had not happened."],
}


@pytest.mark.parametrize("name", sorted(VERBATIM))
def test_key_sentences_from_the_paper_appear_verbatim(name):
    system, user = prompts.SUBSEQUENT[name].render(_example_fields(name))
    for sentence in VERBATIM[name]:
        assert sentence in system + "\n" + user
    assert system.startswith("You are a strict, consistent evaluator for a full-duplex spoken "
                             "dialogue benchmark.")
    assert system.endswith('Return strict JSON only: {"answer": "YES"|"NO", "reason": '
                           '"<one short sentence>"}.')
    assert user.endswith('Reply with JSON: {"answer": "YES"|"NO", "reason": '
                         '"<one short sentence>"}.')


@pytest.mark.parametrize("name", sorted(prompts.SUBSEQUENT))
def test_verbatim_prompts_match_the_paper_once_braces_are_dropped(name):
    """Our system prompt and template, written the way the PDF extraction prints them, occur
    in the paper's text as one run of characters."""
    paper = _paper_text()
    p = prompts.SUBSEQUENT[name]
    assert p.verbatim

    def extracted(s: str) -> str:
        return s.replace(prompts.JSON_REPLY, prompts.JSON_REPLY[1:-1])

    assert extracted(p.system) in paper
    placeholder = {"condition_context": "CONDITION_PROMPTS[condition_id]"}
    parts = [ln.label if ln.field is None else
             f"{ln.label}: {placeholder.get(ln.field, ln.field)}"
             + (f" or ’{ln.fallback}’" if ln.fallback else "") for ln in p.lines]
    template = " ".join(parts + [extracted(q) for q in p.question])
    assert f"User prompt template. {template}" in paper


def test_condition_contexts_come_from_the_taxonomy_and_are_in_the_paper():
    paper = _paper_text()
    for action in ("wait", "hold_floor", "interrupt"):
        contexts = prompts.condition_prompts(action)
        assert set(contexts) == {c.judge_key for c in taxonomy.conditions_of(action)}
        for key, text in contexts.items():
            assert f"{key}: {text}" in paper


def test_our_prompts_are_marked_as_ours():
    assert not prompts.BACKCHANNEL_GENUINE.verbatim
    assert not prompts.SIMULATOR.verbatim
    assert all(p.verbatim for p in prompts.SUBSEQUENT.values())
    paper = _paper_text()
    assert "Is the candidate a genuine" not in paper  # not pretending to be the paper's


def test_empty_fields_show_the_papers_fallbacks():
    _, user = prompts.RECOVER.render({"interrupted_contribution": "", "interruption": "Stop.",
                                      "model_recovery": "  "})
    assert "Interrupted contribution (what the model was saying): (not shown)" in user
    assert "Model recovery (speech with onset in the observation window): (model produced no " \
           "speech)" in user
    with pytest.raises(KeyError, match="model_recovery"):
        prompts.RECOVER.render({"interrupted_contribution": "", "interruption": "Stop."})


def test_audio_prompt_offers_exactly_the_backchannel_conditions():
    ids = [c.id for c in taxonomy.conditions_of("backchannel")]
    assert prompts.AUDIO_FUNCTION_SCHEMA["properties"]["function"]["enum"] == ids
    for cid in ids:
        assert f'"{cid}"' in prompts.AUDIO_FUNCTION_SYSTEM
    assert "acknowledgement, understanding, or agreement" in prompts.AUDIO_FUNCTION_SYSTEM


# --- golden files -------------------------------------------------------------------------

def _example_fields(name: str) -> dict[str, str]:
    """One fixed, readable example per prompt."""
    wait = taxonomy.condition("wait", "intra_sentential_pause")
    hold = taxonomy.condition("hold_floor", "simplify")
    intr = taxonomy.condition("interrupt", "help")
    return {
        "wait": {"condition_id": prompts.condition_id(wait),
                 "condition_context": wait.judge_context,
                 "user_during_or_after_wait": "for four people at eight tonight",
                 "model_response": "Sure, I can book a table for four at eight tonight."},
        "take_turn": {"condition_id": "delayed",
                      "user_speech": "Can you move my dentist appointment to Friday, but not "
                                     "before ten?",
                      "model_response": "I moved it to Friday at eleven."},
        "hold_floor": {"condition_id": prompts.condition_id(hold),
                       "required_adjustment": hold.judge_context,
                       "cue": "Sorry, that's a bit too technical for me.",
                       "model_through_cue": "Photosynthesis converts photons into chemical "
                                            "energy via the Calvin cycle and",
                       "model_after_cue": "in simple words, plants use sunlight to make food."},
        "interrupt": {"condition_id": prompts.condition_id(intr),
                      "condition_context": intr.judge_context,
                      "user_speech": "I'm going to drive to the airport on the ring road, "
                                     "which should take",
                      "model_interruption": "The ring road is closed today; take the "
                                            "motorway instead."},
        "backchannel": {"user_before_and_overlap": "So I finally moved to Berlin",
                        "user_between": "and honestly I love it there.",
                        "model_backchannel": "oh nice",
                        "model_later": "That sounds like a great move for you."},
        "ignore": {"addressed_user_speech": "What time does the bank close?",
                   "ignored_speech": "honey, grab the keys",
                   "model_response": "Most banks close at five on weekdays."},
        "recover": {"interrupted_contribution": "The three main causes are inflation, "
                                                "supply chains and",
                    "interruption": "Can you just give me the short version?",
                    "model_recovery": "Sure: prices, shipping and demand."},
        "backchannel_genuine": {"user_before_and_overlap": "So I finally moved to Berlin",
                                "candidate": "oh nice", "model_next": "",
                                "gap_to_next": ""},
    }[name]


def _simulator_example() -> dict[str, str]:
    cond = taxonomy.condition("recover", "repeat")
    return {"action": cond.action, "condition_id": prompts.condition_id(cond),
            "cue_purpose": cue_purpose(cond), "cue": "Sorry, can you say that again?",
            "reference": "The museum opens at nine and closes at six, except on Mondays.",
            "heard": "The museum opens at nine and", "speaking_for": "2.0 s"}


def _golden_cases():
    cases = {name: p.render(_example_fields(name)) for name, p in prompts.ALL.items()}
    cases["simulator"] = prompts.SIMULATOR.render(_simulator_example())
    cases["backchannel_function"] = (prompts.AUDIO_FUNCTION_SYSTEM, prompts.AUDIO_FUNCTION_USER
                                     + "\n[input_audio: the candidate segment, WAV]")
    return cases


def _golden_text(system: str, user: str) -> str:
    return f"### system\n{system}\n### user\n{user}\n"


@pytest.mark.parametrize("name", sorted(_golden_cases()))
def test_rendered_prompt_matches_its_golden_file(name):
    text = _golden_text(*_golden_cases()[name])
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("DUPLEXACT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}; see this module's docstring"
    assert path.read_text(encoding="utf-8") == text
