"""``oracle``: a privileged reference model that performs each instance's expected action
with the instance's own reference audio (docs/models.md has the full table).

It reads ``SessionInfo.instance`` (annotations and clips), which a model under test must
never do, so a run with it checks the harness end to end: pipelines, segmentation, rules and
reports should give it immediate success everywhere a rule can decide alone. Where the
expected action depends on when the simulator injects the cue (stop, hold_floor, recover),
it reacts to the input's energy like a listener would; everything else is scheduled from the
annotations when the session starts. Its native transcript is the clips' timed transcripts.
"""

from __future__ import annotations

import numpy as np

from ...data import taxonomy
from ...data.annotations import Instance
from ...data.timeline import Word
from ...listen.activity import FRAME_S, Change, EnergyGate, speech_spans, squeeze_pauses
from ..contract import SessionInfo, StepOutput
from ..slots import PerSlotBatch
from ..util.playback import Player, Speech

# Every clip the oracle speaks: pauses longer than this are shortened to PAUSE_S (energy
# edges; the VAD's edges sit a little wider).
MAX_PAUSE_S, PAUSE_S = 0.2, 0.15
# Direct Replay actions: where the reference's speech starts, relative to user_end.
REPLY_AFTER_S = {"wait": 0.3, "ignore": 0.3, "backchannel": 0.4}
TAKE_TURN_ONSET_S = {"immediate": 0.2, "delayed": 1.0, "slight_overlap": -0.5}
# backchannel: the reply keeps at least this much silence after the backchannel, so the two
# never merge into one segment.
AFTER_BACKCHANNEL_GAP_S = 1.0
# Simulator Replay actions.
LEAD_IN_REPLY_S = 0.4  # the reference starts this long after the lead-in's speech ends
REACTION_S = 0.2  # stop / recover: falls silent this long after the cue's speech starts
RECOVERY_AFTER_S = 0.3  # recover: the recovery starts this long after the cue's speech ends
HOLD_PAST_CUE_S = 1.5  # hold_floor: keeps speaking at least this long past the cue's end
HOLD_REPEAT_GAP_S = 0.15
# The input gate: more sensitive than the simulator's (the benchmark's input is clean, and a
# background-speech cue sits 15 dB down), with a shorter hangover so the end of the lead-in /
# cue is noticed in time (pauses inside them are bridged using the annotations).
INPUT_ON_DB, INPUT_OFF_DB = -50.0, -60.0
# On recorded (noisy) audio the gate turns on this far above the lead-in's noise floor (its
# 5th-percentile frame level) when that is higher than the levels above, up to a ceiling.
NOISE_MARGIN_DB = 15.0
MAX_INPUT_ON_DB = -35.0
INPUT_HANGOVER_S = 0.25
NO_LEAD_IN_SPEECH_WAIT_S = 1.0  # if the lead-in's end is never heard, start anyway


def missing_clips(instances) -> str | None:
    """One message when any instance lacks a clip the oracle speaks (the model-side clips are
    optional in the format, docs/dataset-format.md), else None."""
    from collections import Counter

    lacking = Counter()
    for inst in instances:
        for role in taxonomy.RECORDS[inst.action].oracle_clips:
            if role not in inst.clips:
                lacking[(inst.action, role)] += 1
    if not lacking:
        return None
    parts = ", ".join(f"{n} {a} instance(s) without '{r}'" for (a, r), n in sorted(lacking.items()))
    return ("the oracle performs each instance with its model-side clips, and this dataset "
            f"lacks them ({parts}); use another model, or select instances that have them")


def _speech(instance: Instance, role: str) -> Speech:
    """A clip ready to play. Pauses inside it longer than MAX_PAUSE_S are shortened to
    PAUSE_S (words moved along), so the oracle's turn is one segment for the VAD (whose merge
    gap is 0.3 s) and a hold_floor gap never nears 0.5 s."""
    clip = instance.clip(role)
    audio, remap = squeeze_pauses(clip.load(), MAX_PAUSE_S, PAUSE_S)
    words = tuple(Word(remap(w.start), max(remap(w.start), remap(w.end)), w.text)
                  for w in clip.transcript)
    return Speech.of(audio, words, instance.text(role))


def _input_levels(clip: np.ndarray, sample_rate: int) -> tuple[float, float]:
    """Gate levels for the input: the defaults on clean audio, raised above a noise floor."""
    frame = int(FRAME_S * sample_rate)
    n = len(clip) // frame
    if n == 0:
        return INPUT_ON_DB, INPUT_OFF_DB
    rms = np.sqrt(np.mean(np.square(clip[: n * frame].reshape(n, frame), dtype=np.float64),
                          axis=1))
    floor = float(np.percentile(rms, 5))
    if floor <= 0:
        return INPUT_ON_DB, INPUT_OFF_DB
    on = min(MAX_INPUT_ON_DB, max(INPUT_ON_DB, 20 * np.log10(floor) + NOISE_MARGIN_DB))
    return on, on - (INPUT_ON_DB - INPUT_OFF_DB)


class OracleModel(PerSlotBatch):  # --duplexact-batch: models/slots.py
    name = "oracle"
    sample_rate = 16_000
    frame_size = 320  # 20 ms

    def start(self, info: SessionInfo) -> None:
        inst = info.instance
        self.instance = inst
        self.action = inst.action
        self.player = Player(self.sample_rate, self.frame_size)
        self.gate = EnergyGate(self.sample_rate, on_db=INPUT_ON_DB, off_db=INPUT_OFF_DB,
                               hangover_s=INPUT_HANGOVER_S)
        self.k = 0
        self.phase = "scheduled"
        ann = inst.annotations
        if inst.pipeline is taxonomy.Pipeline.SIMULATOR:  # stop, hold_floor, recover
            self._start_simulator(inst)
        elif self.action == "take_turn":
            self.player.play(_speech(inst, "reference"),
                             ann.user_end + TAKE_TURN_ONSET_S[inst.condition])
        elif self.action == "backchannel":
            bc = _speech(inst, "backchannel")
            bc_onset = self.player.play(bc, ann.backchannel_point)
            reply = max(ann.user_end + REPLY_AFTER_S["backchannel"],
                        bc_onset + bc.duration_of_speech + AFTER_BACKCHANNEL_GAP_S)
            self.player.play(_speech(inst, "reference"), reply)
        elif self.action == "interrupt":
            self.player.play(_speech(inst, "reference"), ann.interrupt_target)
        elif self.action in REPLY_AFTER_S:
            self.player.play(_speech(inst, "reference"),
                             ann.user_end + REPLY_AFTER_S[self.action])
        else:
            raise ValueError(f"oracle: no behaviour for action {self.action!r}")

    def _start_simulator(self, inst: Instance) -> None:
        self.reference = _speech(inst, "reference")
        lead = inst.clip("lead_in").load()
        on_db, off_db = _input_levels(lead, self.sample_rate)
        self.gate = EnergyGate(self.sample_rate, on_db=on_db, off_db=off_db,
                               hangover_s=INPUT_HANGOVER_S)
        spans = speech_spans(lead, self.sample_rate, on_db=on_db, off_db=off_db,
                             hangover_s=INPUT_HANGOVER_S)
        # privileged: where the lead-in's speech really ends (ignore pauses inside it)
        self.lead_in_speech_end = spans[-1][1] if spans else 0.0
        self.lead_in_duration = len(lead) / self.sample_rate
        ann = inst.annotations
        self.cue_speech = ann.cue_end - ann.cue_start
        self.recovery = _speech(inst, "recovery") if self.action == "recover" else None
        self.reference_onset: float | None = None
        self.cue_onset: float | None = None
        self.phase = "lead_in"

    # --- reacting to the input (stop, hold_floor, recover) ------------------------------------
    def _react(self, change: Change, now: float) -> None:
        if self.phase == "lead_in" and change.kind == "offset" \
                and change.time >= self.lead_in_speech_end - 0.1:
            self._speak_reference(change.time + LEAD_IN_REPLY_S, now)
        elif self.phase == "speaking" and change.kind == "onset" \
                and change.time >= self.reference_onset:
            self.cue_onset = change.time
            if self.action == "hold_floor":
                self._hold_through(change.time + self.cue_speech + HOLD_PAST_CUE_S, now)
                self.phase = "done"
            else:
                self.player.cut(max(now, change.time + REACTION_S))
                self.phase = "yielded"
        elif self.phase == "yielded" and self.action == "recover" and change.kind == "offset" \
                and change.time - self.cue_onset >= self.cue_speech - 0.3:
            self.player.play(self.recovery, change.time + RECOVERY_AFTER_S, not_before=now)
            self.phase = "done"

    def _speak_reference(self, onset: float, now: float) -> None:
        self.reference_onset = self.player.play(self.reference, onset, not_before=now)
        self.phase = "speaking"

    def _hold_through(self, until: float, now: float) -> None:
        end = self.player.busy_until()
        while end < until:
            onset = self.player.play(self.reference, max(end, now) + HOLD_REPEAT_GAP_S,
                                     not_before=now)
            end = onset + self.reference.duration_of_speech

    def step(self, frame: np.ndarray) -> StepOutput:
        now = (self.k + 1) * self.frame_size / self.sample_rate  # the next frame starts here
        for change in self.gate.feed(frame):
            self._react(change, now)
        if self.phase == "lead_in" and now >= self.lead_in_duration + NO_LEAD_IN_SPEECH_WAIT_S:
            self._speak_reference(now, now)
        out = self.player.render(self.k)
        self.k += 1
        return out

    def finish(self) -> None:
        self.player = None
