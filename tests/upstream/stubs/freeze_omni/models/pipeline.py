"""``inferencePipeline`` as ``bin/server.py`` drives it, with a deterministic state head.

Listening (``stat`` 'sl' / 'cl', one 160 ms chunk of fbank features per call): the state head
says 'ss' once the user has stopped (duplexact_stub.EndOfTurn on the features' energy), and
the server then interrupts and generates. Speaking ('cs'): one word of SENTENCE per call with
a hidden state, then 'sl' (the answer is over). Our own state rides in ``past_key_values``,
which the server carries between calls without looking inside."""

from __future__ import annotations

import duplexact_stub as stub
import numpy as np
import torch

WORDS = stub.SENTENCE.split()
HIDDEN = 896  # the size bin/server.py reshapes the hidden states to
CHUNK_S = 0.16


class _Tokenizer:
    def encode(self, text):
        return list(range(max(1, len(text.split()))))

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(WORDS[: len(ids)])


class _Embed:
    def __call__(self, ids):
        return torch.zeros(len(ids), HIDDEN)


class _Model:
    def __init__(self):
        self.tokenizer = _Tokenizer()
        self.llm_decoder = type("D", (), {"model": type("M", (), {"embed_tokens": _Embed()})()})()


class inferencePipeline:
    def __init__(self, args):
        self.args = args
        self.model = _Model()

    def speech_dialogue(self, audio, role=None, stat="sl", past_key_values=None, last_id=None,
                        past_tokens=None, adapter_cache=None, encoder_cache=None, pe_index=0):
        state = dict(past_key_values or {"turn": stub.EndOfTurn(), "word": 0})
        out = dict(past_key_values=state, stat=stat, last_id=last_id,
                   adapter_cache=adapter_cache, encoder_cache=encoder_cache, pe_index=pe_index)
        if stat == "pre":
            out["stat"] = "sl"
        elif stat in ("sl", "cl"):
            if stat == "sl":
                state["turn"] = stub.EndOfTurn()
            out["stat"] = "cl"
            if audio is not None and state["turn"].feed(_loudness(audio), CHUNK_S):
                stub.log("ss")
                out["stat"] = "ss"
                state["word"] = 0
        elif stat in ("ss", "cs"):
            k = state["word"]
            if k >= len(WORDS):
                out["stat"] = "sl"
                stub.log("answer_end")
                return out
            state["word"] = k + 1
            tokens = list(past_tokens or []) + [k]
            out.update(stat="cs", last_id=[[k]], past_tokens=tokens,
                       text=" ".join(WORDS[: k + 1]),
                       hidden_state=torch.zeros(1, HIDDEN))
        return out

    def post_process(self, text):
        return text


def _loudness(feats) -> float:
    """The RMS our torchaudio stand-in put in every feature of a frame (its log-energy)."""
    x = np.asarray(feats, dtype=np.float64).reshape(-1, np.asarray(feats).shape[-1])
    return float(np.exp(x[-16:, 0].max()))  # the 16 new frames of the chunk
