"""A scripted bridge server: the real kit (pytest_duplexact/bridges) serving a built-in stepped
model instead of a neural one, so every onset and word has a known truth.

Scripts (``--script JSON``, fields of ``Script``):

* ``"model": "endpoint"``: the cascade baseline (models/endpoint.py) behind the kit, 16 kHz,
  20 ms frames: it answers each user turn 0.7 s after the user stops, stops on barge-in. Run
  in process it is ``--duplexact-model=endpoint``: the bridge route must hear the same audio.
* ``"model": "at"``: the endpoint's bundled reply (real speech, with its word timings) whose
  speech starts at ``speak_at_s`` in every trial, whatever it hears: 24 kHz, 80 ms frames by
  default (``rate``, ``frame``).

Each word a model says goes out as TEXT (" word") in the step its audio starts. Faults:
``error_at_step`` (the model raises: ERROR), ``end_at_step`` (``SessionEnded``: CLOSE),
``stall_at_step`` (the step never returns), ``short_at_step`` (a frame one sample short: the
kit refuses it with ERROR), only in trials whose instance id contains ``faults_in``.
``mode``: ``stepped`` or ``streaming``.

Run standalone (its own process)::

    python tests/fakes/bridge_server.py --port 0 --script '{"model": "at"}'
    # prints "listening on ws://127.0.0.1:PORT ...", serves until SIGTERM
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, fields

import numpy as np

from pytest_duplexact.bridges import SessionEnded, main
from pytest_duplexact.models.contract import SessionInfo, StepOutput


@dataclass(frozen=True)
class Script:
    model: str = "at"
    mode: str = "stepped"
    rate: int = 24_000
    frame: int = 1_920
    speak_at_s: float = 1.0
    transcript: bool = True
    error_at_step: int | None = None
    end_at_step: int | None = None
    stall_at_step: int | None = None
    short_at_step: int | None = None
    faults_in: str = ""            # only trials whose instance id contains this get the faults

    @classmethod
    def from_json(cls, text: str) -> "Script":
        data = json.loads(text)
        bad = sorted(set(data) - {f.name for f in fields(cls)})
        if bad:
            raise SystemExit(f"unknown script field(s): {', '.join(bad)}")
        return cls(**data)


class SpeaksAt:
    """A stepped model that says the endpoint's reply with its speech starting at ``at``."""

    name = "at"

    def __init__(self, rate: int, frame: int, at: float):
        self.sample_rate, self.frame_size, self.at = rate, frame, at

    def start(self, info: SessionInfo) -> None:
        from pytest_duplexact.data.audio import resample
        from pytest_duplexact.models.providers.endpoint import response
        from pytest_duplexact.models.util.playback import Player, Speech

        reply = response()
        speech = Speech.of(resample(reply.audio, 16_000, self.sample_rate), reply.words,
                           sample_rate=self.sample_rate)
        self.player = Player(self.sample_rate, self.frame_size)
        self.player.play(speech, self.at)
        self.k = 0

    def step(self, frame: np.ndarray) -> StepOutput:
        out = self.player.render(self.k)
        self.k += 1
        return out

    def finish(self) -> None:
        self.player = None


def make_model(script: Script):
    if script.model == "endpoint":
        from pytest_duplexact.models.providers.endpoint import EndpointModel

        return EndpointModel()
    if script.model == "at":
        return SpeaksAt(script.rate, script.frame, script.speak_at_s)
    raise SystemExit(f"unknown script model {script.model!r}")


class ScriptedBridge:
    """The kit's model contract around a built-in stepped model (one per process)."""

    def __init__(self, script: Script):
        self.script = script
        self.model = make_model(script)
        self.name = f"scripted-{script.model}"
        self.mode, self.transcript = script.mode, script.transcript
        self.sample_rate, self.frame = self.model.sample_rate, self.model.frame_size

    def open(self, options: dict[str, str], trial) -> "ScriptedTrial":
        if options:
            raise ValueError(f"unknown option(s) {', '.join(sorted(options))}")
        self.model.start(SessionInfo(instance=None, seed=trial.seed))
        return ScriptedTrial(self, self.script.faults_in in trial.id)


class ScriptedTrial:
    def __init__(self, bridge: ScriptedBridge, faulty: bool):
        self.bridge, self.k, self.faulty = bridge, 0, faulty

    def step(self, frame: np.ndarray):
        s, k = self.bridge.script, self.k if self.faulty else -1
        self.k += 1
        if k == s.error_at_step:
            raise RuntimeError("scripted failure")
        if k == s.end_at_step:
            raise SessionEnded("scripted end of session")
        if k == s.stall_at_step:
            threading.Event().wait(120)  # a model stuck in a call (the process is killed)
        out = self.bridge.model.step(frame)
        audio = out.audio[:-1] if k == s.short_at_step else out.audio
        return audio, [" " + w.text for w in out.transcript]

    def close(self) -> None:
        self.bridge.model.finish()


if __name__ == "__main__":
    def add(p):
        p.add_argument("--script", default="{}", help="a Script as JSON")

    raise SystemExit(main(lambda args: ScriptedBridge(Script.from_json(args.script)),
                          prog="bridge_server.py", add_arguments=add))
