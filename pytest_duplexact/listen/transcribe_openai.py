"""whisper-1 behind the Transcriber interface: the paper's ASR for model speech (D.1).

One ``audio.transcriptions`` request per clip (verbose_json, word timestamps), through the same
cache and retry policy as the judges (remote/calls.py). The model, base URL and key come from
the constructor or DUPLEXACT_TRANSCRIBE_MODEL / DUPLEXACT_TRANSCRIBE_BASE_URL /
OPENAI_API_KEY. A clip that cannot be transcribed raises TranscriptionError: the instance
is then a harness error, never a model failure.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable

import numpy as np
import openai

from ..data.timeline import Word
from ..remote import calls
from ..remote.cache import RequestCache, sha256_hex
from ..remote.wav import wav_bytes

DEFAULT_MODEL = "whisper-1"
ENV_MODEL = "DUPLEXACT_TRANSCRIBE_MODEL"
ENV_BASE_URL = "DUPLEXACT_TRANSCRIBE_BASE_URL"
MIN_SECONDS = 0.1  # the service rejects shorter audio; shorter clips are padded with silence


class TranscriptionError(RuntimeError):
    pass


def parse_words(payload: dict) -> tuple[Word, ...]:
    """verbose_json words -> Words; anything malformed is an unusable answer."""
    words = payload.get("words")
    if words is None:
        if (payload.get("text") or "").strip():
            raise calls.InvalidAnswer("text without word timestamps")
        return ()
    out = []
    for w in words:
        try:
            text, start, end = w["word"], float(w["start"]), float(w["end"])
        except (KeyError, TypeError, ValueError):
            raise calls.InvalidAnswer(f"malformed word {w!r}") from None
        if not isinstance(text, str) or not (math.isfinite(start) and math.isfinite(end)) \
                or end < start:
            raise calls.InvalidAnswer(f"malformed word {w!r}")
        out.append(Word(start, end, text.strip()))
    return tuple(out)


class OpenAITranscriber:
    """Transcriber (transcribe.py) over the OpenAI transcription endpoint."""

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, language: str | None = None,
                 policy: calls.RetryPolicy | None = None, cache: RequestCache | None = None,
                 client: openai.OpenAI | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.model = model or os.environ.get(ENV_MODEL) or DEFAULT_MODEL
        self.name = f"openai:{self.model}"
        self.language = language
        self.policy = policy or calls.DEFAULT_POLICY
        self.cache = cache
        self.counters = calls.Counters()
        self.base_url = base_url or os.environ.get(ENV_BASE_URL) or None
        self._remote = calls.Remote(self.base_url, api_key, self.policy.timeout, client)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"OpenAITranscriber(model={self.model!r})"

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> tuple[Word, ...]:
        if len(audio) == 0:
            return ()
        wav = wav_bytes(audio, sample_rate, MIN_SECONDS)
        params = {"response_format": "verbose_json", "timestamp_granularities": ["word"]}
        if self.language:
            params["language"] = self.language
        request = {"endpoint": "audio.transcriptions", "model": self.model, "params": params,
                   "audio_sha256": sha256_hex(wav)}

        def send() -> dict:
            resp = self._remote.client().audio.transcriptions.create(
                file=("audio.wav", wav, "audio/wav"), model=self.model, **params)
            if isinstance(resp, str):  # a 200 whose body was not JSON (an HTML page)
                raise calls.InvalidAnswer(f"not a transcription: {resp[:80]!r}")
            words = getattr(resp, "words", None)
            seconds = getattr(resp, "duration", None)  # what the service bills (per second)
            return {"text": getattr(resp, "text", None),
                    **({"usage": {"audio_s": float(seconds)}}
                       if isinstance(seconds, (int, float)) else {}),
                    "words": None if words is None else
                    [{"word": w.word, "start": w.start, "end": w.end} for w in words]}

        try:
            out = calls.perform(request=request, send=send, parse=parse_words,
                                cache=self.cache, policy=self.policy, counters=self.counters,
                                sleep=self._sleep, secret=self._remote.secret,
                                abandon=self._remote.abandon)
        except calls.RequestFailed as e:
            raise TranscriptionError(f"transcriber {self.model}: {e}") from None
        return out.value
