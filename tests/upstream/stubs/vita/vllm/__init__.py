"""Stands in for vLLM 0.5.5 (the engine running VITA's LLM on a GPU) as web_demo/server.py's
``load_model`` uses it: ``LLM(...)``, ``SamplingParams(...)``, ``llm.generate(inputs, ...)``
returning outputs whose ``outputs[0].text`` is the answer: the stubs' fixed sentence, at once
(the VAD's end of the user's turn, 500 ms of silence, is already the decision's delay). Each
answer is logged ("answer") with the number of audio inputs in its prompt (the history)."""

from __future__ import annotations

from types import SimpleNamespace

import duplexact_cuda_shim  # noqa: F401
import duplexact_stub as stub


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class LLM:
    def __init__(self, model=None, **kwargs):
        self.model = model

    def generate(self, inputs, sampling_params=None, **_):
        audios = len(inputs.get("multi_modal_data", {}).get("audio", []))
        stub.log("answer", audio_inputs=audios)
        return [SimpleNamespace(outputs=[SimpleNamespace(text=stub.SENTENCE)])]
