"""The DuplexAct taxonomy: the one place that names actions, conditions, windows and thresholds.

Everything else (instance loader, rules, judges, suites, reports) reads this module; no other
module spells a condition id. Each action is one ``ActionRecord`` (``RECORDS``): its label,
conditions, timing diagnostic, judge prompt, oracle clips, cue purpose and released config;
``ACTIONS``, ``CONDITIONS`` and the other per-action tables are views of the records. Source:
SPEC.md §1-§5 and Appendix B of the DuplexAct paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Pipeline(str, Enum):
    """How an instance is presented to the model (SPEC §7)."""

    DIRECT = "direct"  # Direct Replay: fixed user audio + observation period
    SIMULATOR = "simulator"  # Simulator Replay: lead-in, then a cue injected mid-response
    BARGE_IN = "barge_in"  # Simulator Replay for interrupt: the user holds the floor


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

# The tightest span a rule decides on: take_turn immediate's [0, 0.5] s window (hold_floor's
# 0.5 s gap is as tight). A wall-clock trial whose harness was late by a fifth of it (100 ms)
# may have moved its verdict: that is --duplexact-timing-tolerance's default
# (docs/realtime.md, "Timing integrity").
TIGHTEST_WINDOW_S = min(min(hi - lo for lo, hi in TAKE_TURN_WINDOWS.values()),
                        HOLD_FLOOR_MAX_GAP_S)
TIMING_TOLERANCE_S = round(TIGHTEST_WINDOW_S / 5, 3)

# Borderline verdicts (rules/borderline.py): an immediate verdict is borderline when moving
# one timeline edge (an onset, an offset, a pause edge) by this much flips it. The figure is
# the timeline's measured edge error where it holds its noise targets, rounded up: white noise
# at -35 dBFS, onset / offset |error| max 62 / 118 ms, p95 31 / 36 ms, and -25 dBFS onset p95
# 98 ms (docs/benchmarks.md, part 2b); on clean speech every edge is within 4 ms.
# docs/timeline.md ("Borderline verdicts") states it and what lies past it.
BORDERLINE_EDGE_S = 0.10

# --- The actions: one record each, in the paper's Table 4 order ----------------------------

@dataclass(frozen=True)
class Timing:
    """An action's timing diagnostic (SPEC §5), reported as T in Table 4."""

    diagnostic: str  # its name in the outcome and the report, e.g. yield_latency
    title: str  # its title on the HTML report's chart
    minimum: float | None  # the least value it can take (its rule's window); None: no floor


@dataclass(frozen=True)
class ActionRecord:
    """Everything about one L1 action that is not its rule's logic; the logic is
    ``rules/<action>.py``, whose ``RULE.record`` is this. Every consumer reads the record (no
    parallel per-action tables): the report its label, conditions and timing, the gates the
    timing's minimum, the judges its prompt, the oracle its clips, the LLM simulator its cue
    purpose, the released data its config and item count. tests/rules/test_action_records.py
    checks that every piece is there and agrees with the rest of the package."""

    action: str
    label: str  # its name in the report's tables (Table 4)
    conditions: tuple[Condition, ...]  # its L2 conditions, in Table 16 order
    oracle_clips: tuple[str, ...]  # the model-side clips the built-in oracle speaks
    # its config in the released parquet (released/mapping.toml) and its instances there (the
    # dataset card; Candor excluded); None: not in the released data
    released_config: str | None = None
    released_items: int | None = None
    prompt: str | None = None  # its subsequent prompt (judges/prompts.py); None: S by rule
    timing: Timing | None = None
    cue_purpose: str | None = None  # Simulator Replay: what its cue is for (ours, C.2)


def _record(action: str, label: str, conditions, **pieces) -> ActionRecord:
    """``conditions``: (id, label, pipeline[, judge_key, judge_context]) rows."""
    return ActionRecord(action, label, tuple(Condition(action, *row) for row in conditions),
                        **pieces)


_D, _S, _B = Pipeline.DIRECT, Pipeline.SIMULATOR, Pipeline.BARGE_IN

# The 24 conditions within their actions, in the paper's Table 16 order.
RECORDS: dict[str, ActionRecord] = {r.action: r for r in (
    _record("wait", "Wait", (
        ("inter_sentential_pause", "Inter-sentential", _D, "inter_sentential_pause",
         "The wait interval is a pause between sentences. The user\u2019s continuing "
         "contribution is what they say after that pause (the next sentence and anything that "
         "follows until the model responds)."),
        ("intra_sentential_pause", "Intra-sentential", _D, "intra_sentential_pause",
         "The wait interval is a pause inside a sentence. The user\u2019s continuing "
         "contribution is what they say after that pause (the rest of the sentence and anything "
         "that follows until the model responds)."),
        ("continuous_speech", "Continuous", _D, "no_pause",
         "There is no annotated pause. The wait interval is the user\u2019s continuous turn. The "
         "user\u2019s continuing contribution is that turn (and anything said after it, if any) "
         "until the model responds.")),
        oracle_clips=("reference",), released_config="wait", released_items=370,
        prompt="wait"),
    _record("ignore", "Ignore", (
        ("background_speech", "Background", _D),
        ("other_directed_speech", "Other-directed", _D)),
        oracle_clips=("reference",), released_config="ignore", released_items=400,
        prompt="ignore"),
    _record("take_turn", "Take Turn", (
        ("immediate", "Immediate", _D),
        ("delayed", "Delayed", _D),
        ("slight_overlap", "Slight overlap", _D)),
        oracle_clips=("reference",), released_config="turn_taking", released_items=445,
        prompt="take_turn"),
    _record("backchannel", "Backchannel", (
        ("affirmative", "Affirmative", _D),
        ("uncertainty", "Uncertainty", _D)),
        oracle_clips=("reference", "backchannel"), released_config="backchannel",
        released_items=294, prompt="backchannel"),
    _record("stop", "Stop", (
        ("direct_interruption", "Direct", _S),),
        oracle_clips=("reference",), released_config="stop", released_items=42,
        timing=Timing("yield_latency", "yield latency", 0.0),
        cue_purpose="The user interrupts to take the floor."),
    _record("hold_floor", "Hold Floor", (
        ("continue", "Continue", _S, "continue_current_response",
         "Continue the current response without unnecessary change."),
        ("shorten", "Shorten", _S, "continue_but_shorten",
         "Shorten or condense the ongoing response."),
        ("simplify", "Simplify", _S, "continue_with_simplification",
         "Simplify the language or content of the ongoing response."),
        ("background_speech", "Background", _S, "continue_with_background_speech",
         "Preserve the current content; do not treat background speech as addressed input."),
        ("other_directed_speech", "Other-dir.", _S, "continue_with_other_directed_speech",
         "Preserve the current content; do not treat other-directed speech as addressed "
         "input.")),
        oracle_clips=("reference",), released_config="hold_floor", released_items=729,
        prompt="hold_floor",
        cue_purpose="A cue that does not require the model to give up the floor."),
    _record("interrupt", "Interrupt", (
        ("help", "Help", _B, "interrupt_for_help",
         "The user is proceeding in a direction where timely help would matter. An "
         "interruption is needed to offer the specific assistance or constraint the current "
         "situation requires."),
        ("safety", "Safety", _B, "interrupt_for_safety",
         "The user is describing a dangerous or hazardous behaviour. An interruption is needed "
         "to flag the specific safety risk and to say why it is dangerous or what to do "
         "instead.")),
        oracle_clips=("reference",), released_config="interrupt_user", released_items=400,
        prompt="interrupt",
        timing=Timing("interruption_timing_difference", "timing vs target", None)),
    _record("recover", "Recover", (
        ("wrap_up", "Wrap up", _S),
        ("repeat", "Repeat", _S),
        ("ask_follow_up", "Ask follow-up", _S),
        ("enrich", "Enrich", _S),
        ("shift_topic", "Shift topic", _S),
        ("revise", "Revise", _S)),
        oracle_clips=("reference", "recovery"), released_config="respond_and_recover",
        released_items=776, prompt="recover",
        timing=Timing("recovery_latency", "latency after the cue", RECOVER_WINDOW[0]),
        cue_purpose="An interruption that the model should adapt its response to afterwards."),
)}

# Views of the records, for the readers that want one piece of every action.
ACTIONS: tuple[str, ...] = tuple(RECORDS)
ACTION_LABELS: dict[str, str] = {a: r.label for a, r in RECORDS.items()}
# Actions whose timing diagnostic is reported as T, and its title on the HTML report's chart.
TIMING_DIAGNOSTIC: dict[str, str] = {a: r.timing.diagnostic for a, r in RECORDS.items()
                                     if r.timing is not None}
TIMING_TITLES: dict[str, str] = {a: r.timing.title for a, r in RECORDS.items()
                                 if r.timing is not None}
CONDITIONS: tuple[Condition, ...] = tuple(c for r in RECORDS.values() for c in r.conditions)
CONDITIONS_BY_KEY: dict[str, Condition] = {c.key: c for c in CONDITIONS}


def conditions_of(action: str) -> tuple[Condition, ...]:
    if action not in RECORDS:
        raise KeyError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
    return RECORDS[action].conditions


def condition(action: str, condition_id: str) -> Condition:
    try:
        return CONDITIONS_BY_KEY[f"{action}.{condition_id}"]
    except KeyError:
        known = ", ".join(c.id for c in conditions_of(action))
        raise KeyError(
            f"unknown condition {condition_id!r} for action {action!r}; known: {known}"
        ) from None


# Rates and their presentation.
RATE_KINDS: tuple[str, ...] = ("I", "S")
