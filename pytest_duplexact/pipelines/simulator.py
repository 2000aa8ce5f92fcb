"""Simulator Replay for stop, hold_floor and recover (SPEC §7, paper App. C.2).

1. Stream the lead-in (it elicits a response).
2. Keep streaming silence while watching the model's output with an online energy detector
   (``SpeechTracker``; scoring later uses the real VAD, not this). Once the model speaks, poll
   the cue-timing policy every ``policy.poll_interval`` seconds of session time.
3. Inject the instance's prerecorded cue when the policy says so, or force it at the deadline:
   ``MAX_WAIT_AFTER_SPEECH_S`` after the model started speaking, or ``MAX_WAIT_NO_SPEECH_S``
   after the lead-in if the model never spoke. The cue's speech interval on the timeline is
   injection time + the clip's annotated cue_start / cue_end; ``forced`` says how it came.
4. Observe for ``OBSERVATION_S`` after the cue clip.

Whether a trial counts (the cue overlapping model speech) is decided by the rules later; the
pipeline records what happened faithfully, forced injections included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..data.annotations import Instance
from ..data.audio import SAMPLE_RATE, silence
from ..data.timeline import Cue
from ..listen.activity import EnergyGate
from .direct import CHUNK_S, push_in_chunks, read_clip
from .duplex import Duplex, Recording
from .policy import SimulatorPolicy, SimulatorState

MAX_WAIT_AFTER_SPEECH_S = 8.0  # force the cue this long after the model started speaking
MAX_WAIT_NO_SPEECH_S = 12.0  # ... or this long after the lead-in if it never spoke
# Long enough for recover's window (cue end + 5 s) and for stop's follow-through, which
# looks for new turns during and after the intervention.
OBSERVATION_S = 8.0
RULE_MIN_SPEECH_S = 1.5  # the rule policy waits for this much continuous model speech
RULE_POLL_S = 0.1
# "Audible right now": a loud frame within this much of the end of what was heard. The
# tracker's hangover bridges pauses between words for "continuous"; this keeps a policy from
# injecting into the silence right after the model stopped.
AUDIBLE_WITHIN_S = 0.1


class SpeechTracker:
    """Follows ``duplex.heard()`` incrementally with an ``EnergyGate`` (activity.py)."""

    def __init__(self, duplex: Duplex):
        self.duplex = duplex
        self.gate = EnergyGate(SAMPLE_RATE)
        self._seen = 0

    def update(self) -> None:
        heard = self.duplex.heard()
        if len(heard) > self._seen:
            self.gate.feed(heard[self._seen:])
            self._seen = len(heard)

    @property
    def speaking(self) -> bool:
        return self.gate.speaking

    @property
    def since(self) -> float | None:
        """Onset of the current stretch of speech (None while silent)."""
        return self.gate.onset if self.gate.speaking else None

    @property
    def audible(self) -> bool:
        g = self.gate
        return g.speaking and g.last_loud is not None and g.time - g.last_loud <= AUDIBLE_WITHIN_S


@dataclass
class RuleBasedSimulator:
    """The offline, deterministic cue-timing policy ("rule"): inject once the model has been
    speaking continuously for ``min_speech_s`` and is audible at that moment."""

    min_speech_s: float = RULE_MIN_SPEECH_S
    poll_interval: float = RULE_POLL_S
    name: str = "rule"

    def decide(self, state: SimulatorState) -> bool:
        return (state.model_speaking and state.speaking_since is not None
                and state.now - state.speaking_since >= self.min_speech_s - 1e-9)


@dataclass
class SimulatorReplay:
    policy: SimulatorPolicy = field(default_factory=RuleBasedSimulator)
    chunk_s: float = CHUNK_S
    max_wait_after_speech_s: float = MAX_WAIT_AFTER_SPEECH_S
    max_wait_no_speech_s: float = MAX_WAIT_NO_SPEECH_S
    observation_s: float = OBSERVATION_S

    def _state(self, duplex: Duplex, tracker: SpeechTracker, lead_in_end: float,
               instance: Instance) -> SimulatorState:
        return SimulatorState(
            now=duplex.now, lead_in_end=lead_in_end, model_speaking=tracker.audible,
            speaking_since=tracker.since,
            heard_transcript=" ".join(w.text for w in duplex.transcript()),
            reference=instance.text("reference"), cue_text=instance.text("cue"),
            condition=instance.cond)

    async def run(self, duplex: Duplex, instance: Instance) -> Recording:
        tracker = SpeechTracker(duplex)
        lead_in = await read_clip(duplex, instance.clip("lead_in"))
        cue_audio = await read_clip(duplex, instance.clip("cue"))  # read now, not on cue
        await push_in_chunks(duplex, lead_in, self.chunk_s, tracker.update)
        lead_in_end = duplex.now
        duplex.event("lead_in_end")
        speech_started: float | None = None  # first model speech still going after the lead-in
        next_poll = 0.0
        gap = silence(self.chunk_s)
        while True:
            tracker.update()
            now = duplex.now
            if speech_started is None and tracker.speaking:
                speech_started = max(tracker.since, lead_in_end)
                duplex.event(f"model_speech_onset {tracker.since:.3f}")
            if speech_started is not None and now >= next_poll:
                next_poll = now + self.policy.poll_interval
                if self.policy.decide(self._state(duplex, tracker, lead_in_end, instance)):
                    forced = False
                    break
            deadline = (speech_started + self.max_wait_after_speech_s if speech_started
                        is not None else lead_in_end + self.max_wait_no_speech_s)
            if now >= deadline:
                forced = True
                break
            await duplex.push(gap)

        injected = duplex.now
        ann = instance.annotations
        cue = Cue(round(injected + ann.cue_start, 6), round(injected + ann.cue_end, 6),
                  forced=forced)
        duplex.event("cue_forced" if forced else f"cue_injected ({self.policy.name})")
        await push_in_chunks(duplex, cue_audio, self.chunk_s)
        duplex.event("cue_clip_end")
        await push_in_chunks(duplex, silence(self.observation_s), self.chunk_s)
        return replace(await duplex.close(), cue=cue)
