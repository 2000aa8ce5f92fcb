"""A Hugging Face-like text tokenizer over ``vocab.json`` in a checkpoint folder:
``{"pieces": {"id": "piece", ...}, "eos": id, "pad": id}``. Pieces use SentencePiece's "▁"
for a word start; ``decode`` joins them as a SentencePiece decoder does (the leading space of
the text dropped); pieces written ``<...>`` or ``[...]`` are special."""

from __future__ import annotations

import json
from pathlib import Path


def write_vocab(folder: Path, pieces: dict[int, str], eos: int = 2, pad: int = 1) -> None:
    (Path(folder) / "vocab.json").write_text(json.dumps(
        {"pieces": {str(k): v for k, v in pieces.items()}, "eos": eos, "pad": pad}))


class FakeTokenizer:
    def __init__(self, folder: str | Path):
        data = json.loads((Path(folder) / "vocab.json").read_text())
        self.pieces = {int(k): v for k, v in data["pieces"].items()}
        self.ids = {v: k for k, v in self.pieces.items()}
        self.eos_token_id, self.pad_token_id = data["eos"], data["pad"]

    @classmethod
    def from_pretrained(cls, folder, **_):
        return cls(folder)

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.ids[token]

    def encode(self, text: str, add_special_tokens: bool = False, **_) -> list[int]:
        return [self.ids[p] for p in text.split("|") if p]  # "|"-separated pieces

    def decode(self, ids, skip_special_tokens: bool = False, **_) -> str:
        out = []
        for i in ids:
            piece = self.pieces.get(int(i), "\ufffd")
            if skip_special_tokens and piece[:1] in "<[" and piece[-1:] in ">]":
                continue
            out.append(piece)
        return "".join(out).replace("▁", " ").lstrip(" ")


AutoTokenizer = FakeTokenizer
