"""The DuplexAct taxonomy: the one place that names actions, conditions, windows and thresholds.

Everything else (instance loader, rules, judges, suites, reports) reads this module; no other
module spells a condition id. Source: SPEC.md §1-§5 and Appendix B of the DuplexAct paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Pipeline(str, Enum):
    """How an instance is presented to the model (SPEC §7)."""

    DIRECT = "direct"  # Direct Replay: fixed user audio + observation period
    SIMULATOR = "simulator"  # Simulator Replay: lead-in, then a cue injected mid-response
    BARGE_IN = "barge_in"  # Simulator Replay for interrupt: the user holds the floor


# --- L1 actions, in the paper's Table 4 order ---------------------------------------------
ACTIONS: tuple[str, ...] = (
    "wait",
    "ignore",
    "take_turn",
    "backchannel",
    "stop",
    "hold_floor",
    "interrupt",
    "recover",
)

ACTION_LABELS: dict[str, str] = {
    "wait": "Wait",
    "ignore": "Ignore",
    "take_turn": "Take Turn",
    "backchannel": "Backchannel",
    "stop": "Stop",
    "hold_floor": "Hold Floor",
    "interrupt": "Interrupt",
    "recover": "Recover",
}

# Actions whose timing diagnostic (SPEC §5) is reported as T in Table 4, and its title on the
# HTML report's chart.
TIMING_DIAGNOSTIC: dict[str, str] = {
    "stop": "yield_latency",
    "interrupt": "interruption_timing_difference",
    "recover": "recovery_latency",
}
TIMING_TITLES: dict[str, str] = {
    "stop": "yield latency",
    "interrupt": "timing vs target",
    "recover": "latency after the cue",
}

# "unspecified": an instance whose data does not say (the released set may not); reported
# under that name, never dropped.
SCENARIOS: tuple[str, ...] = ("casual", "meeting", "customer_service", "interview",
                              "unspecified")
SCENARIO_LABELS: dict[str, str] = {
    "casual": "Casual conversation",
    "meeting": "Meeting",
    "customer_service": "Customer service",
    "interview": "Interview",
    "unspecified": "Unspecified",
}
SOURCES: tuple[str, ...] = ("real", "synthesized")
# The corpora the paper's instances come from (optional ``corpus`` field of an instance).
CORPORA: tuple[str, ...] = ("AMI", "CORAAL", "Loqui", "synthesized", "Candor")


@dataclass(frozen=True)
class Condition:
    """One L2 action-condition pair.

    ``judge_key`` is the key the paper's Appendix B prompts use for this condition (they do not
    always match the canonical id: continuous_speech is ``no_pause`` there), and
    ``judge_context`` the condition-specific context / requirement string, verbatim. Both are
    ``None`` where the action's prompt has no condition-specific text.
    """

    action: str
    id: str
    label: str
    pipeline: Pipeline
    judge_key: str | None = None
    judge_context: str | None = None

    @property
    def key(self) -> str:
        """``action.condition``: unique across the benchmark (other_directed_speech is not)."""
        return f"{self.action}.{self.id}"

    @property
    def prompt_id(self) -> str:
        """The id the judge prompts print: the paper's key where it differs (no_pause)."""
        return self.judge_key or self.id


def _c(action, cid, label, pipeline, judge_key=None, judge_context=None) -> Condition:
    return Condition(action, cid, label, pipeline, judge_key, judge_context)


_D, _S, _B = Pipeline.DIRECT, Pipeline.SIMULATOR, Pipeline.BARGE_IN

# The 24 conditions, in the paper's Table 16 order within each action.
CONDITIONS: tuple[Condition, ...] = (
    _c("wait", "inter_sentential_pause", "Inter-sentential", _D, "inter_sentential_pause",
       "The wait interval is a pause between sentences. The user\u2019s continuing contribution is "
       "what they say after that pause (the next sentence and anything that follows until the "
       "model responds)."),
    _c("wait", "intra_sentential_pause", "Intra-sentential", _D, "intra_sentential_pause",
       "The wait interval is a pause inside a sentence. The user\u2019s continuing contribution is "
       "what they say after that pause (the rest of the sentence and anything that follows until "
       "the model responds)."),
    _c("wait", "continuous_speech", "Continuous", _D, "no_pause",
       "There is no annotated pause. The wait interval is the user\u2019s continuous turn. The "
       "user\u2019s continuing contribution is that turn (and anything said after it, if any) "
       "until the model responds."),
    _c("ignore", "background_speech", "Background", _D),
    _c("ignore", "other_directed_speech", "Other-directed", _D),
    _c("take_turn", "immediate", "Immediate", _D),
    _c("take_turn", "delayed", "Delayed", _D),
    _c("take_turn", "slight_overlap", "Slight overlap", _D),
    _c("backchannel", "affirmative", "Affirmative", _D),
    _c("backchannel", "uncertainty", "Uncertainty", _D),
    _c("stop", "direct_interruption", "Direct", _S),
    _c("hold_floor", "continue", "Continue", _S, "continue_current_response",
       "Continue the current response without unnecessary change."),
    _c("hold_floor", "shorten", "Shorten", _S, "continue_but_shorten",
       "Shorten or condense the ongoing response."),
    _c("hold_floor", "simplify", "Simplify", _S, "continue_with_simplification",
       "Simplify the language or content of the ongoing response."),
    _c("hold_floor", "background_speech", "Background", _S, "continue_with_background_speech",
       "Preserve the current content; do not treat background speech as addressed input."),
    _c("hold_floor", "other_directed_speech", "Other-dir.", _S,
       "continue_with_other_directed_speech",
       "Preserve the current content; do not treat other-directed speech as addressed input."),
    _c("interrupt", "help", "Help", _B, "interrupt_for_help",
       "The user is proceeding in a direction where timely help would matter. An interruption "
       "is needed to offer the specific assistance or constraint the current situation "
       "requires."),
    _c("interrupt", "safety", "Safety", _B, "interrupt_for_safety",
       "The user is describing a dangerous or hazardous behaviour. An interruption is needed to "
       "flag the specific safety risk and to say why it is dangerous or what to do instead."),
    _c("recover", "wrap_up", "Wrap up", _S),
    _c("recover", "repeat", "Repeat", _S),
    _c("recover", "ask_follow_up", "Ask follow-up", _S),
    _c("recover", "enrich", "Enrich", _S),
    _c("recover", "shift_topic", "Shift topic", _S),
    _c("recover", "revise", "Revise", _S),
)

CONDITIONS_BY_KEY: dict[str, Condition] = {c.key: c for c in CONDITIONS}


def conditions_of(action: str) -> tuple[Condition, ...]:
    if action not in ACTIONS:
        raise KeyError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
    return tuple(c for c in CONDITIONS if c.action == action)


def condition(action: str, condition_id: str) -> Condition:
    try:
        return CONDITIONS_BY_KEY[f"{action}.{condition_id}"]
    except KeyError:
        known = ", ".join(c.id for c in conditions_of(action))
        raise KeyError(
            f"unknown condition {condition_id!r} for action {action!r}; known: {known}"
        ) from None


# --- Windows and thresholds (SPEC §2-§3, paper Appendix B), in seconds ----------------------

BACKCHANNEL_MAX_WORDS = 3  # a segment of <= 3 words is a backchannel, > 3 substantive
OBSERVATION_PERIOD_S = 15.0  # silence appended after Direct Replay user content

# wait: the conditions whose window is an annotated pause (the other, continuous_speech, waits
# through the whole user turn).
WAIT_PAUSE_CONDITIONS: tuple[str, ...] = ("inter_sentential_pause", "intra_sentential_pause")

# backchannel: the paper's audio judge labels a function "affirmative" or "uncertain"; the
# condition id is "uncertainty". Either spelling is accepted, in any case.
BACKCHANNEL_FUNCTION_ALIASES: dict[str, str] = {"uncertain": "uncertainty"}

# take_turn: window relative to user-speech end (t = 0 there).
TAKE_TURN_WINDOWS: dict[str, tuple[float, float]] = {
    "immediate": (0.0, 0.5),
    "delayed": (0.0, 3.0),
    "slight_overlap": (-1.0, 0.5),
}
HOLD_FLOOR_TAIL_S = 1.0  # window is [cue_start, cue_end + 1.0]
HOLD_FLOOR_MAX_GAP_S = 0.50  # longest silence gap allowed inside that window
INTERRUPT_END_MARGIN_S = 1.0  # window is [user_start, user_end - 1.0]
RECOVER_WINDOW: tuple[float, float] = (-2.0, 5.0)  # relative to interruption end
STOP_FINAL_GRACE_S = 1.0  # substantive onsets in the intervention's last 1.0 s are allowed

# Rates and their presentation.
RATE_KINDS: tuple[str, ...] = ("I", "S")
