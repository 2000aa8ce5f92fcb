"""``OmniVisionInference`` as Mini-Omni2's ``server.py`` drives it: ``warm_up()``, then per
``POST /chat`` ``run_AT_batch_stream(audio_path, stream_stride, max_tokens, save_path=...)``
yielding (raw int16 24 kHz PCM bytes, text) per generation step. The stub reads the posted
WAV (it must hold speech: the decision is logged with its length), then answers with the
shared 1 s voice and fixed sentence in ``STEPS`` steps, ``STEP_S`` apart (a model generating
twice as fast as real time)."""

from __future__ import annotations

import time
import wave

import duplexact_stub as stub
import numpy as np

RATE = 24_000
STEPS = 10
STEP_S = 0.05


class OmniVisionInference:
    def __init__(self, ckpt_dir="./checkpoint", device="cuda:0"):
        self.ckpt_dir = ckpt_dir

    def warm_up(self):
        pass

    def run_AT_batch_stream(self, audio_path, stream_stride=4, max_tokens=2048,
                            save_path=None, sr=16000):
        with wave.open(audio_path, "rb") as w:
            x = np.frombuffer(w.readframes(w.getnframes()), "<i2")
            seconds = len(x) / w.getframerate()
        stub.log("answer", input_s=seconds, stream_stride=stream_stride)
        pcm = np.round(np.clip(stub.voice(), -1, 1) * 32767).astype("<i2")
        words = stub.SENTENCE.split()
        for k in range(STEPS):
            a, b = len(pcm) * k // STEPS, len(pcm) * (k + 1) // STEPS
            wa, wb = len(words) * k // STEPS, len(words) * (k + 1) // STEPS
            text = " ".join(words[wa:wb]) + (" " if wb < len(words) and wb > wa else "")
            if k:
                time.sleep(STEP_S)
            yield pcm[a:b].tobytes(), text

    def run_vision_AA_batch_stream(self, *args, **kwargs):
        raise NotImplementedError("the stub answers audio only")
