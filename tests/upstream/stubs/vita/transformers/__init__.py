"""Stands in for the tokenizer and the audio feature extractor that ship with VITA's weights
(``AutoTokenizer`` / ``AutoFeatureExtractor.from_pretrained(model_path)``): one token per
word, and a feature tensor of the right rank; only the stubbed LLM and TTS read them."""

from __future__ import annotations

from types import SimpleNamespace

import torch


class _Tokenizer:
    bos_token_id = None

    def __call__(self, text):
        return SimpleNamespace(input_ids=self.encode(text))

    def encode(self, text):
        return list(range(len(text.split())))


class _FeatureExtractor:
    def __call__(self, audio, sampling_rate=16000, return_tensors="pt"):
        frames = max(1, int(torch.as_tensor(audio).shape[-1]) // 160)
        return {"input_features": torch.zeros(1, 80, frames)}


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **_):
        return _Tokenizer()


class AutoFeatureExtractor:
    @staticmethod
    def from_pretrained(path, **_):
        return _FeatureExtractor()
