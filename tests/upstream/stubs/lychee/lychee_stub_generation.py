"""Served as ``lychee_fd.runtime.vllm_generation`` in Lychee-FD's ``app.py`` process (see
sitecustomize.py): the generator (vLLM and the model) replaced by ours, deterministic, and the
authors' own ``StreamingDecoder``, read from their file (its class only: the module's other
imports are the model's).

The stub's incremental session takes each inference window of 16 kHz input and decides with
``duplexact_turns.TurnTaker``: 0.5 s after the user stops it answers (``state_change`` L->S,
then the speech tokens of a 1 s answer at once, as a GPU outruns real time, with the sentence's
text tokens among them), it ends the answer (S->L) once 1 s of input has passed, and user
speech during the answer interrupts it (S->L, ``interrupt``, an early exit as the control head
reports one). Speech token ``25 n + j`` is the ``j``-th 40 ms piece of the session's ``n``-th
answer for our Token2Wav stand-in (tests/upstream/lychee_sidecar.py: each answer a little
quieter, since app.py drops audio whose bytes repeat an earlier chunk's); ``SILENT_TOKEN`` is
silence. Five of them pad the 25 (1 s): the decoder flushes tokens in tens and the vocoder
emits 12 with a lookahead of 3 (the authors' launcher), so 30 let 24 play at once.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import typing

import numpy as np
from duplexact_turns import SENTENCE, TurnTaker

STOKEN_BASE = 151_696
ANSWER_TOKENS = 25          # 1 s at 25 tokens/s
SILENT_TOKEN = 6_500
PAD_TOKENS = 5
MAX_ANSWERS = 200           # token ids stay below SILENT_TOKEN
WORD_BASE = 1_000
INPUT_RATE = 16_000


def _authors_streaming_decoder() -> type:
    spec = importlib.util.find_spec("lychee_fd")
    path = os.path.join(list(spec.submodule_search_locations)[0], "runtime", "vllm_generation.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StreamingDecoder"]
    scope = {"List": typing.List, "Dict": typing.Dict, "Optional": typing.Optional}
    exec(compile(ast.Module([node], []), path, "exec"), scope)
    return scope["StreamingDecoder"]


StreamingDecoder = _authors_streaming_decoder()


class _Tokenizer:
    words = SENTENCE.split()

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.words[i - WORD_BASE] for i in ids
                        if 0 <= i - WORD_BASE < len(self.words))


class _Session:
    def __init__(self, fw, initial_listening_state="l", **_):
        self.fw = fw
        self.taker = TurnTaker(f"lychee-{id(self):x}", INPUT_RATE)
        self.state = initial_listening_state if initial_listening_state in ("l", "s") else "l"
        self.chunk = 0
        self.keep_alive_for_speaking = True
        self.answers = 0

    def _answer_tokens(self):
        words = SENTENCE.split()
        for k in range(ANSWER_TOKENS + PAD_TOKENS):
            word = k // 4
            text = WORD_BASE + word if k % 4 == 0 and word < len(words) else self.fw.text_pad_token_id
            voice = ANSWER_TOKENS * (self.answers % MAX_ANSWERS) + k
            stoken = STOKEN_BASE + (voice if k < ANSWER_TOKENS else SILENT_TOKEN)
            yield {"type": "speaking_token", "text_token": text, "stoken": stoken,
                   "chunk": self.chunk, "chunk_idx": self.chunk}

    def advance_stream(self, audio, emit_generation_complete=False, audio_is_incremental=True,
                       flush_audio_tail=False, control_early_callback=None, **_):
        self.chunk += 1
        yield {"type": "chunk_start", "chunk_idx": self.chunk}
        was = self.taker.answer is not None
        self.taker.step(np.asarray(audio, np.float32).reshape(-1))
        now = self.taker.answer is not None
        started = now and not was
        if was and not now:  # stopped by the user, or the answer's second is over
            cut = self.taker.ended == "stop"
            yield {"type": "state_change", "from": "S", "to": "L", "chunk": self.chunk,
                   "interrupt": cut, "interrupt_reason": "user_speech" if cut else None,
                   "early_exit": cut, "reason": "interrupt" if cut else "end_speak"}
            self.state = "l"
        if started:
            yield {"type": "control_decision", "token": self.fw.ss_token_id, "chunk_idx": self.chunk}
            yield {"type": "state_change", "from": "L", "to": "S", "chunk": self.chunk,
                   "reason": "start_speak"}
            self.state = "s"
            yield from self._answer_tokens()
            self.answers += 1
        elif self.state == "l":
            yield {"type": "control_decision", "token": self.fw.kl_token_id, "chunk_idx": self.chunk}
        yield {"type": "chunk_end", "chunk_idx": self.chunk}
        if emit_generation_complete:
            yield self.build_generation_complete_event()

    def get_listening_state(self):
        return self.state

    def get_prefix(self):
        return {"input_ids": [self.chunk]}

    def build_generation_complete_event(self):
        return {"type": "generation_complete", "input_ids": [self.chunk]}

    def close(self):
        self.taker.close()
        return {}


class VLLMGenerationFramework:
    """The generator ``load_models`` builds (``LYCHEEFD_USE_VLLM=1``): no model, our session."""

    kl_token_id, ss_token_id, sl_token_id, ks_token_id, bc_token_id = 151_650, 151_651, \
        151_652, 151_653, 151_654
    text_pad_token_id, tts_pad_id = 151_600, 151_601
    stoken_delay_token_id, stoken_pad_token_id = 151_690, 151_691

    def __init__(self, *args, **kwargs):
        self.tokenizer = _Tokenizer()

    def create_incremental_stream_session(self, prefix=None, initial_listening_state="l", **kw):
        return _Session(self, initial_listening_state)

    create_hf_incremental_stream_session = create_incremental_stream_session
