"""``endpoint``: a classic cascade baseline (VAD endpointing -> fixed spoken reply).

It listens to the input's energy. When the user has been silent for ``silence_s`` after
speaking, it says its one bundled reply (assets/response.flac, "Okay, thanks for telling me.
Let me help you with that."). If the user speaks while it talks, it stops ``reaction_s``
later (barge-in) and waits for the user to finish again. It never backchannels, never
interrupts and cannot tell addressed from other speech: a floor for turn-taking timing.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...data import audio
from ...data.timeline import Word
from ...listen.activity import EnergyGate
from ..contract import SessionInfo, StepOutput
from ..slots import PerSlotBatch
from ..util.playback import Player, Speech

ASSETS = Path(__file__).resolve().parents[1] / "assets"
SILENCE_S = 0.7  # user silence that ends a turn
REACTION_S = 0.2  # barge-in: falls silent this long after the user starts speaking


@lru_cache(maxsize=1)
def response() -> Speech:
    meta = json.loads((ASSETS / "response.json").read_text(encoding="utf-8"))
    words = [Word(w["start"], w["end"], w["text"]) for w in meta["words"]]
    return Speech.of(audio.read(ASSETS / "response.flac"), words)


class EndpointModel(PerSlotBatch):  # --duplexact-batch: models/slots.py
    name = "endpoint"
    sample_rate = 16_000
    frame_size = 320  # 20 ms

    def __init__(self, silence_s: float | str = SILENCE_S, reaction_s: float | str = REACTION_S):
        # options may arrive as strings from --duplexact-model-option KEY=VALUE
        self.silence_s = float(silence_s)
        self.reaction_s = float(reaction_s)
        if self.silence_s <= 0 or self.reaction_s < 0:
            raise ValueError(f"endpoint: silence_s must be > 0 and reaction_s >= 0, got "
                             f"{self.silence_s} and {self.reaction_s}")

    def start(self, info: SessionInfo) -> None:
        self.reply = response()
        self.player = Player(self.sample_rate, self.frame_size)
        self.gate = EnergyGate(self.sample_rate)
        self.k = 0

    def step(self, frame: np.ndarray) -> StepOutput:
        now = (self.k + 1) * self.frame_size / self.sample_rate  # the next frame starts here
        for change in self.gate.feed(frame):
            if change.kind == "onset":
                if self.player.sounding(now):  # barge-in
                    self.player.cut(max(now, change.time + self.reaction_s))
                else:  # the user went on before the silence threshold: no reply yet
                    self.player.cut(now)
            else:  # end of user speech: reply once the silence has lasted silence_s
                self.player.play(self.reply, change.time + self.silence_s, not_before=now)
        out = self.player.render(self.k)
        self.k += 1
        return out

    def finish(self) -> None:
        self.player = None
