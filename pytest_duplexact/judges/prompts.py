"""The judge prompts: Appendix B of the DuplexAct paper, verbatim, plus three of our own.

Verbatim (paper "Exact evaluation prompt"): the system prompts and user prompt templates of
wait (B.2), take_turn (B.3), hold_floor (B.5), interrupt (B.6), backchannel subsequent (B.7),
ignore (B.8) and recover (B.9). The condition-specific context strings are not repeated here:
they are ``taxonomy.Condition.judge_context`` under ``judge_key``. Characters are kept as
printed (curly apostrophes). Two repairs of the PDF extraction, the same everywhere:

* the JSON braces are restored: the paper prints ``"answer": "YES"|"NO", "reason": ...``,
  we send ``{"answer": "YES"|"NO", "reason": "<one short sentence>"}``;
* template placeholders lost their braces too (``Condition: condition_id``); the fallback
  written after ``or`` (``’(none)’``) is the Python default, so the prompt shows ``(none)``
  without the quotes. Line breaks are ours (the extraction has none): one field a line, a
  blank line before the question, the question's criteria one a line.

Page furniture that the extraction dropped into the middle of four templates ("21 Preprint",
...) is removed. Stop has no judge (rules only, B.4).

OURS (the paper gives no exact text): the backchannel stage-2 "genuine backchannel?" prompt,
the stage-3 audio-judge prompt and the simulator prompt (used by pipelines/simulator_llm.py).
They follow the paper's wording where it describes the stage, and are marked
``verbatim=False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..data import taxonomy

JSON_REPLY = '{"answer": "YES"|"NO", "reason": "<one short sentence>"}'
_EVALUATOR = ("You are a strict, consistent evaluator for a full-duplex spoken dialogue "
              "benchmark.")
_STRICT = f"Return strict JSON only: {JSON_REPLY}."
_AMBIGUOUS = "If the evidence is ambiguous or insufficient, answer NO."


@dataclass(frozen=True)
class Line:
    """One line of a user prompt: ``label: value``; ``field`` None makes it fixed text.
    ``fallback`` is shown when the value is empty (the paper's ``or '(none)'``)."""

    label: str
    field: str | None = None
    fallback: str | None = None

    def render(self, fields: Mapping[str, str]) -> str:
        if self.field is None:
            return self.label
        value = (fields.get(self.field) or "").strip()
        if not value and self.fallback is not None:
            value = self.fallback
        return f"{self.label}: {value}"


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    lines: tuple[Line, ...]
    question: tuple[str, ...]
    verbatim: bool  # True: Appendix B text; False: ours (documented in docs/judges.md)
    source: str

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(ln.field for ln in self.lines if ln.field is not None)

    def render(self, fields: Mapping[str, str]) -> tuple[str, str]:
        """(system, user). Every field the template names must be present (may be empty)."""
        missing = [f for f in self.fields if f not in fields]
        if missing:
            raise KeyError(f"prompt {self.name!r} needs field(s) {', '.join(missing)}")
        body = "\n".join(ln.render(fields) for ln in self.lines)
        return self.system, body + "\n\n" + "\n".join(self.question)


def _question(q: str, yes: str, no: str) -> tuple[str, ...]:
    return (f"Question: {q}", yes, no, f"Reply with JSON: {JSON_REPLY}.")


def condition_prompts(action: str) -> dict[str, str]:
    """The paper's CONDITION_PROMPTS for one action: judge_key -> context, from taxonomy."""
    return {c.judge_key: c.judge_context for c in taxonomy.conditions_of(action)
            if c.judge_key is not None and c.judge_context is not None}


def condition_id(cond: taxonomy.Condition) -> str:
    """The id the prompts print: the paper's key where it differs from ours (no_pause)."""
    return cond.prompt_id


WAIT = Prompt(
    "wait",
    f"{_EVALUATOR} You will be shown the wait condition, the user’s speech during or after "
    "that wait interval, and the model’s later response. Answer a single yes/no question "
    f"using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: wait"),
     Line("Condition", "condition_id"),
     Line("Condition", "condition_context", "(not specified)"),
     Line("User speech during or after the wait interval", "user_during_or_after_wait",
          "(none)"),
     Line("Model response", "model_response", "(model produced no speech)")),
    _question(
        "Is the model’s response relevant, and does it include some information from the "
        "user’s continuing contribution during or after the wait interval?",
        "Answer YES if the response is on-topic and uses at least some of that later or "
        "overlapping user content. Complete uptake of every detail is not required.",
        "Answer NO if the response is irrelevant, or if it ignores that continuing "
        "contribution."),
    True, "B.2")

TAKE_TURN = Prompt(
    "take_turn",
    f"{_EVALUATOR} You will be shown one user utterance and the model’s spoken response, and "
    "asked a single yes/no question. Answer using ONLY the evidence given. If the evidence is "
    "ambiguous, insufficient, or the model produced no relevant speech, answer NO. "
    f"{_STRICT}",
    (Line("Action: take_turn"),
     Line("Condition", "condition_id"),
     Line("User speech", "user_speech"),
     Line("Model response", "model_response", "(model produced no speech)")),
    _question(
        "Does the model’s response address the user’s intent by respecting the information "
        "and constraints in the user’s speech?",
        "Answer YES if the response takes up what the user was asking or doing, and it uses "
        "(does not ignore or contradict) the facts, limits, and revisions in that speech.",
        "Answer NO if it misses the intent, or if it ignores or contradicts information or "
        "constraints from the user’s speech."),
    True, "B.3")

HOLD_FLOOR = Prompt(
    "hold_floor",
    f"{_EVALUATOR} You will be shown what the model was saying before and during a cue, what "
    "it said after the cue ended, and what this condition required. Answer a single yes/no "
    f"question using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: hold_floor"),
     Line("Condition", "condition_id"),
     Line("What this condition requires", "required_adjustment", "(not specified)"),
     Line("Cue", "cue", "(none)"),
     Line("Model speech before and during the cue", "model_through_cue", "(none)"),
     Line("Model speech after the cue ended", "model_after_cue", "(none)")),
    _question(
        "Relative to what the model was saying before and during the cue, does its speech "
        "after the cue ended meet this condition’s requirement?",
        "Answer YES if it keeps the same thread and does what the condition asked (keep going, "
        "shorten, simplify, or ignore a distractor).",
        "Answer NO if it abandons the thread, takes up a cue that should be ignored, or fails "
        "to make the change the condition required."),
    True, "B.5")

INTERRUPT = Prompt(
    "interrupt",
    f"{_EVALUATOR} You will be shown why an interruption is needed, the user’s speech, and "
    "the model’s interruption, and asked a single yes/no question. Answer using ONLY the "
    f"evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: interrupt"),
     Line("Condition", "condition_id"),
     Line("Condition (why an interruption is needed)", "condition_context", "(not specified)"),
     Line("User speech (what was underway)", "user_speech"),
     Line("Model interruption", "model_interruption", "(model produced no speech)")),
    _question(
        "Did this interruption do the work this condition required, rather than merely "
        "announcing that an interruption is happening?",
        "Answer YES if the model’s speech addresses the obstacle or action described in the "
        "condition.",
        "Answer NO if it only announces the interruption, is generic, off-topic, or misses the "
        "issue."),
    True, "B.6")

BACKCHANNEL = Prompt(
    "backchannel",
    f"{_EVALUATOR} You will be shown the user’s speech before and overlapping the model’s "
    "backchannel, the user’s speech after that backchannel and before the model’s later "
    "response, the backchannel itself, and the later model speech. Answer a single yes/no "
    f"question using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: backchannel"),
     Line("User speech before and overlapping the model backchannel", "user_before_and_overlap",
          "(none)"),
     Line("User speech after the backchannel and before the model’s later response",
          "user_between", "(none)"),
     Line("Model backchannel", "model_backchannel", "(none)"),
     Line("Model later speech", "model_later", "(none)")),
    _question(
        "Is the model’s later speech consistent with the understanding or stance displayed in "
        "its backchannel?",
        "Answer YES if later speech fits that backchannel, or is justified by what the user "
        "said afterwards.",
        "Answer NO if later speech contradicts the backchannel without such justification."),
    True, "B.7")

IGNORE = Prompt(
    "ignore",
    f"{_EVALUATOR} You will be shown the user’s addressed speech, other speech that should be "
    "ignored, and the model’s speech (already restricted to after that other speech ended). "
    f"Answer a single yes/no question using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: ignore"),
     Line("User speech addressed to the model", "addressed_user_speech"),
     Line("Other speech (should be ignored)", "ignored_speech"),
     Line("Model speech (after the other speech ended)", "model_response", "(none)")),
    _question(
        "Does the model’s reply stay free of the other speech?",
        "Answer YES if it neither contains that other speech nor is influenced by it: no "
        "quoting, echoing, answering, or treating it as a fact or task.",
        "Answer NO if the reply includes the other speech or is shaped by it."),
    True, "B.8")

RECOVER = Prompt(
    "recover",
    f"{_EVALUATOR} You will be shown the interrupted contribution, the user’s interruption, "
    "and the model’s recovery in the observation window, and asked a single yes/no question. "
    f"Answer using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: recover"),
     Line("Interrupted contribution (what the model was saying)", "interrupted_contribution",
          "(not shown)"),
     Line("User interruption", "interruption"),
     Line("Model recovery (speech with onset in the observation window)", "model_recovery",
          "(model produced no speech)")),
    _question(
        "Does the model’s response in the observation window make the adjustment this "
        "interruption required?",
        "Answer YES if it adapts as the user’s interruption called for, given what the model "
        "was saying.",
        "Answer NO if it ignores the interruption, adjusts incorrectly, or resumes obsolete "
        "content as if the interruption had not happened."),
    True, "B.9")

# --- OURS: the paper describes these stages but prints no prompt for them ------------------

# Stage 2 of backchannel immediate execution (B.7): the paper's criterion, phrased in the
# style of its other prompts. The next model speech and the gap to it let the judge spot "the
# truncated beginning of a substantive turn".
BACKCHANNEL_GENUINE = Prompt(
    "backchannel_genuine",
    f"{_EVALUATOR} You will be shown the user’s speech before and overlapping a short model "
    "utterance, that utterance, and the model’s next speech if there was any. Answer a single "
    f"yes/no question using ONLY the evidence given. {_AMBIGUOUS} {_STRICT}",
    (Line("Action: backchannel"),
     Line("User speech before and overlapping the model utterance", "user_before_and_overlap",
          "(none)"),
     Line("Model utterance (candidate backchannel)", "candidate", "(none)"),
     Line("Model’s next speech after the candidate", "model_next", "(none)"),
     Line("Silence between the candidate and that next speech", "gap_to_next", "(none)")),
    _question(
        "Is the candidate a genuine, self-contained backchannel that provides listener feedback "
        "while leaving the floor with the user?",
        "Answer YES if it is a complete listener signal on its own (for example an "
        "acknowledgement, agreement, hesitation or a sign of confusion) and does not start a "
        "turn.",
        "Answer NO if it is the truncated beginning of a substantive turn, contains no "
        "intelligible speech, or does not express a listener-feedback function."),
    False, "ours (B.7 stage 2 criterion)")

BACKCHANNEL_FUNCTIONS: tuple[str, ...] = tuple(c.id for c in
                                               taxonomy.conditions_of("backchannel"))

# Stage 3 (audio judge): audio only, no transcript, no condition (B.7). The definitions are
# the paper's (B.7 "Conditions and protocol").
AUDIO_FUNCTION_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "function": {"type": "string", "enum": list(BACKCHANNEL_FUNCTIONS)},
        "reason": {"type": "string"},
    },
    "required": ["function", "reason"],
    "additionalProperties": False,
}
AUDIO_FUNCTION_SYSTEM = (
    f"{_EVALUATOR} You will hear one short listener response (a backchannel) that a spoken "
    "dialogue model produced while a user was speaking. Classify its feedback function from "
    "the audio alone, including its tone and prosody. Affirmative backchannels express "
    "acknowledgement, understanding, or agreement, while uncertainty backchannels express "
    "hesitation, confusion, or a need for clarification. Choose the closer of the two. Return "
    "strict JSON only: {\"function\": "
    + "|".join(f'"{f}"' for f in BACKCHANNEL_FUNCTIONS)
    + ', "reason": "<one short sentence>"}.')
AUDIO_FUNCTION_USER = "Classify the feedback function of this backchannel."

# The subsequent-execution prompts by name; which action reads which is its record's
# ``prompt`` (taxonomy.RECORDS).
CATALOGUE: dict[str, Prompt] = {p.name: p for p in
                                (WAIT, IGNORE, TAKE_TURN, BACKCHANNEL, HOLD_FLOOR, INTERRUPT,
                                 RECOVER)}
SUBSEQUENT: dict[str, Prompt] = {a: CATALOGUE[r.prompt] for a, r in taxonomy.RECORDS.items()
                                 if r.prompt is not None}
ALL: dict[str, Prompt] = {**CATALOGUE, BACKCHANNEL_GENUINE.name: BACKCHANNEL_GENUINE}

# OURS: the Simulator Replay decision (paper C.2 describes its inputs, not its prompt). It
# decides only *when* the fixed cue is played, never what it says.
SIMULATOR = Prompt(
    "simulator",
    "You control the timing of a simulated user in a full-duplex spoken dialogue benchmark. "
    "A spoken dialogue model is answering the user, and the user will play one fixed, "
    "prerecorded cue while the model is still speaking. You decide only when the cue is "
    "played, never what it says. You will be shown what the cue is for, the cue, a reference "
    "response, the model’s speech heard so far and how long the model has been speaking. "
    "Answer a single yes/no question using ONLY the evidence given. "
    f"Return strict JSON only: {JSON_REPLY}.",
    (Line("Action", "action"),
     Line("Condition", "condition_id"),
     Line("What the cue is for", "cue_purpose"),
     Line("Cue", "cue"),
     Line("Reference response", "reference", "(none)"),
     Line("Model speech heard so far", "heard", "(none)"),
     Line("Model speaking for", "speaking_for", "(unknown)")),
    _question(
        "Is now a good moment to play the cue?",
        "Answer YES if the model is in the middle of its response and has said enough that "
        "the cue follows naturally from what was heard (for example after its first complete "
        "phrase or sentence), and it does not seem about to finish.",
        "Answer NO if the model has only just started, has said nothing the cue could respond "
        "to, or seems to be finishing."),
    False, "ours (C.2 simulator)")
