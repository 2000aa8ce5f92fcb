"""Backchannel stage 3: an audio-capable chat model classifies the candidate's function.

It hears the candidate segment's audio only (a WAV sent as an ``input_audio`` content part):
no transcript and no condition, as the paper requires (B.7). The answer is one of the
backchannel condition ids (``affirmative`` | ``uncertainty``), strict JSON; the prompt is ours
(prompts.AUDIO_FUNCTION_SYSTEM). The paper's audio judge is GPT-audio-1.5.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass

import numpy as np

from ..remote import calls
from ..remote.wav import wav_bytes
from . import prompts
from .client import ENV_BASE_URL, ChatJSON

DEFAULT_MODEL = "gpt-audio-1.5"
ENV_MODEL = "DUPLEXACT_AUDIO_JUDGE_MODEL"
ENV_AUDIO_BASE_URL = "DUPLEXACT_AUDIO_JUDGE_BASE_URL"


@dataclass(frozen=True)
class FunctionAnswer:
    """``function`` is a backchannel condition id, or None with ``error`` set."""

    function: str | None
    reason: str
    error: str | None = None
    cached: bool = False


class AudioJudge(ChatJSON):
    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 json_schema: bool = True, **kw):
        super().__init__(model or os.environ.get(ENV_MODEL) or DEFAULT_MODEL,
                         base_url=base_url or os.environ.get(ENV_AUDIO_BASE_URL)
                         or os.environ.get(ENV_BASE_URL) or None,
                         json_schema=json_schema, **kw)
        # Audio chat models need text-only output asked for explicitly.
        self.params.setdefault("modalities", ["text"])

    def classify(self, samples: np.ndarray, sample_rate: int) -> FunctionAnswer:
        if len(samples) == 0:
            return FunctionAnswer(None, "", error="the candidate has no audio")
        data = base64.b64encode(wav_bytes(samples, sample_rate)).decode("ascii")
        messages = [
            {"role": "system", "content": prompts.AUDIO_FUNCTION_SYSTEM},
            {"role": "user", "content": [
                {"type": "text", "text": prompts.AUDIO_FUNCTION_USER},
                {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
            ]},
        ]
        try:
            out = self.ask(messages, "backchannel_function", prompts.AUDIO_FUNCTION_SCHEMA)
        except calls.RequestFailed as e:
            return FunctionAnswer(None, "", error=f"audio judge {self.model}: {e}")
        return FunctionAnswer(out.value["function"], calls.capped(out.value["reason"]),
                              cached=out.cached)
