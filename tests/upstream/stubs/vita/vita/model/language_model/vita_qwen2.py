"""``VITAQwen2Config`` / ``VITAQwen2ForCausalLM`` as the TTS worker uses them: loaded only for
``get_input_embeddings()`` (token ids -> 896-wide embeddings for the TTS decoder)."""

import torch

HIDDEN = 896


class VITAQwen2Config:
    @classmethod
    def from_pretrained(cls, path, **_):
        return cls()


class _Embedding(torch.nn.Module):
    def forward(self, ids):
        return torch.zeros(len(ids), HIDDEN)


class VITAQwen2ForCausalLM:
    @classmethod
    def from_pretrained(cls, path, config=None, **_):
        return cls()

    def get_input_embeddings(self):
        return _Embedding()
