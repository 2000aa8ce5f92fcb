"""When Simulator Replay injects its cue: a pluggable policy (SPEC §7).

A policy only decides *when*; it never produces content. The harness polls it every
``poll_interval`` seconds of session time while the model speaks, and force-injects at the
deadline if it has not fired. The rule-based policy (simulator.py) is the offline default;
the paper's LLM policy is simulator_llm.py (it asks a chat model through the judges' client).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..data.taxonomy import Condition


@dataclass(frozen=True)
class SimulatorState:
    now: float  # session time (s)
    lead_in_end: float  # when the lead-in finished playing
    model_speaking: bool  # model audio audible right now
    speaking_since: float | None  # onset of the current model speech stretch
    heard_transcript: str  # model's streaming transcript aligned to playback, never ahead
    reference: str  # the instance's reference response text
    cue_text: str  # what the cue will say
    condition: Condition


class SimulatorPolicy(Protocol):
    name: str
    poll_interval: float

    def decide(self, state: SimulatorState) -> bool:
        """True: inject the cue now."""
        ...
