"""``llm2TTS`` as the web demo's TTS worker drives it: ``run`` yields the audio of the text it
was given (one embedding row per word) as [1, 1, n] tensors at 24 kHz, its share of the 1 s
answer, the voice continuing where the previous sentence stopped; the first sentence of an
answer (``codec_chunk_size`` 20 in web_demo/server.py) starts it over."""

from __future__ import annotations

import duplexact_cuda_shim  # noqa: F401
import duplexact_stub as stub
import torch

RATE = 24_000
WORDS = len(stub.SENTENCE.split())
PER_WORD = int(round(stub.ANSWER_S * RATE / WORDS))
FIRST_SENTENCE_CHUNK = 20


class llm2TTS:
    def __init__(self, path):
        self.done = 0

    def run(self, hidden, top_k, prefix, codec_chunk_size=40, codec_padding_size=10,
            penalty_window_size=-1, penalty=1.1, N=2401, seg_threshold=0.01):
        if codec_chunk_size == FIRST_SENTENCE_CHUNK:
            self.done = 0
            stub.log("first_audio")
        n = PER_WORD * hidden.reshape(-1, hidden.shape[-1]).shape[0]
        audio = stub.voice(n / RATE, RATE, offset=self.done)
        self.done += n
        yield torch.from_numpy(audio).reshape(1, 1, -1)
