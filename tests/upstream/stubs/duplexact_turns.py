"""The harness's deterministic stand-in for a duplex model's decisions, shared by the stubs
that replace a model's networks (ours; numpy only, so it runs in the author's environment).

Per input frame: an energy gate (RMS over -40 dBFS) says whether the user speaks. After the
user has spoken, 0.5 s of silence makes the stub answer: a 1 s voice-like tone (a 160 Hz
voice with harmonics and a 4 Hz syllable rhythm) and ``SENTENCE`` as text, its words spread
over the tone. User speech during the answer stops it at once (barge-in). Every decision is
appended to ``$DUPLEXACT_STUB_LOG`` (JSON lines: session, event, input_s = seconds of that
session's input consumed when it was taken), the ground truth the harness measures against.
"""

from __future__ import annotations

import json
import os
import threading

import numpy as np

SENTENCE = "this is the stub answering you"
ANSWER_AFTER_S = 0.5
ANSWER_S = 1.0
VOICED_RMS = 0.01  # -40 dBFS
_log_lock = threading.Lock()


def voice(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    x = sum(np.sin(2 * np.pi * 160.0 * h * t) / h for h in (1, 2, 3, 4))
    x = x * (0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t))
    fade = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
    return (0.25 * x * fade).astype(np.float32)


def log(session: str, event: str, input_s: float) -> None:
    path = os.environ.get("DUPLEXACT_STUB_LOG")
    if not path:
        return
    line = json.dumps({"session": session, "event": event, "input_s": round(input_s, 4)})
    with _log_lock, open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


class TurnTaker:
    """One session's decisions; ``step`` takes one input frame, gives the frame to play (the
    same length, at ``rate``) and the text that goes with it."""

    def __init__(self, session: str, rate: int):
        self.session, self.rate = session, rate
        self.t = 0.0
        self.heard = False
        self.silent_s = 0.0
        self.answer: np.ndarray | None = None
        self.pos = 0
        self.words = SENTENCE.split()
        self.said = 0
        self.ended = ""  # how the last answer ended: "stop" (barge-in) or "end"
        log(session, "open", 0.0)

    def step(self, x: np.ndarray) -> tuple[np.ndarray, str]:
        n = len(x)
        self.t += n / self.rate
        voiced = bool(n) and float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) > VOICED_RMS
        if self.answer is not None and voiced:
            log(self.session, "stop", self.t)
            self.answer, self.ended = None, "stop"
        if voiced:
            self.heard, self.silent_s = True, 0.0
        elif self.heard:
            self.silent_s += n / self.rate
            if self.silent_s >= ANSWER_AFTER_S and self.answer is None:
                log(self.session, "answer", self.t)
                self.heard, self.silent_s = False, 0.0
                self.answer, self.pos, self.said = voice(ANSWER_S, self.rate), 0, 0
        if self.answer is None:
            return np.zeros(n, np.float32), ""
        out = np.zeros(n, np.float32)
        piece = self.answer[self.pos:self.pos + n]
        out[:len(piece)] = piece
        self.pos += n
        due = min(len(self.words), -(-len(self.words) * self.pos // len(self.answer)))
        text = "".join((" " if i else "") + self.words[i] for i in range(self.said, due))
        self.said = due
        if self.pos >= len(self.answer):
            log(self.session, "end", self.t)
            self.answer, self.ended = None, "end"
        return out, text

    def close(self) -> None:
        log(self.session, "close", self.t)
