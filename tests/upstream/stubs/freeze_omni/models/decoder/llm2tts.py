"""``llm2TTS`` as ``bin/server.py`` drives it: ``run`` yields the audio of the text it was
given (one hidden state per word) as [1, 1, n] tensors at 24 kHz: its share of the 1 s
answer, continuing the voice where the previous piece stopped."""

from __future__ import annotations

import duplexact_stub as stub
import torch

RATE = 24_000
PER_WORD = int(round(stub.ANSWER_S * RATE / len(stub.SENTENCE.split())))
FIRST_CHUNK = 20  # checkpoints/server.json's decoder_first_chunk_size: an answer's first piece


class llm2TTS:
    def __init__(self, model_path):
        self.done = 0  # samples of the current answer already given

    def run(self, hidden, top_k, prefix, codec_chunk_size=40, codec_padding_size=10,
            penalty_window_size=-1, penalty=1.1, N=2401, seg_threshold=0.01):
        words = prefix.reshape(-1, prefix.shape[-1]).shape[0]
        if codec_chunk_size == FIRST_CHUNK:
            self.done = 0  # a new answer
        n = PER_WORD * words
        audio = stub.voice(n / RATE, RATE, offset=self.done)
        if self.done == 0:
            stub.log("first_audio")
        self.done += n
        yield torch.from_numpy(audio).reshape(1, 1, -1)
