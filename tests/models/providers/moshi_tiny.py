"""A tiny Moshi with random weights, written as checkpoint files, so the tests run the real
``--duplexact-model=moshi`` loading path on CPU in seconds (never for measuring a model).

Mimi: 8 filters, 64 dims, one transformer layer, 8 codebooks of 64 entries; LM: 64 dims, two
layers, a one-layer depformer; tokenizer: a 48-piece SentencePiece model trained here on a few
sentences (ids 0-3 are unk, bos, eos, pad, as in Moshi's tokenizer). A random Mimi's codebooks
are all zeros, so every frame would encode to one code and the output would ignore the input:
``fit_codebooks`` fills them from the encoder's own latents.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

SENTENCES = ["hello there how are you today", "I am fine thanks and you",
             "sure let me help you with that", "okay thanks for telling me",
             "that sounds like a really good plan", "wait hold on a second",
             "so I was thinking we could go there on friday",
             "can you tell me about the museum"] * 5
VOCAB = 48


def mimi_config() -> dict:
    from moshi.models import loaders

    seanet = dict(loaders._seanet_kwargs, n_filters=8, dimension=64)
    transformer = dict(loaders._transformer_kwargs, d_model=64, num_heads=2, num_layers=1,
                       dim_feedforward=128, input_dimension=64, output_dimensions=[64])
    quantizer = dict(loaders._quantizer_kwargs, dimension=16, n_q=8, bins=64,
                     input_dimension=64, output_dimension=64)
    return dict(loaders._mimi_config, seanet=seanet, transformer=transformer,
                quantizer=quantizer)


def lm_config() -> dict:
    from moshi.models import loaders

    return dict(loaders._lm_kwargs, dim=64, text_card=VOCAB, card=64, num_heads=2,
                num_layers=2, hidden_scale=2, context=100, depformer_dim=32,
                depformer_dim_feedforward=64, depformer_num_heads=2, depformer_num_layers=1)


def _probe_audio(seed: int):
    """8 s of varied sound (noise and tones at several levels, silences): enough frames for
    every codebook entry."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sr, parts = 24_000, []
    for k in range(40):
        n = int(0.2 * sr)
        level = 10 ** (rng.uniform(-50, -10) / 20)
        if k % 4 == 0:
            parts.append(np.zeros(n))
        elif k % 2:
            parts.append(level * rng.standard_normal(n))
        else:
            parts.append(level * np.sin(2 * np.pi * rng.uniform(80, 2000) * np.arange(n) / sr))
    return np.concatenate(parts).astype(np.float32)


def fit_codebooks(mimi, seed: int = 0) -> None:
    """Give each codebook entries drawn from the encoder's own latents (residuals for the later
    codebooks), as a k-means initialisation would: random weights put every latent near one
    point, so zero or unit-variance random codebooks map every frame to one code."""
    import torch

    g = torch.Generator().manual_seed(seed)
    audio = torch.from_numpy(_probe_audio(seed))[None, None]
    emb = mimi._encode_to_unquantized_latent(audio)  # [1, D, T]
    for rvq in (mimi.quantizer.rvq_first, mimi.quantizer.rvq_rest):
        x = rvq.input_proj(emb)[0].T  # [T, d]
        for layer in rvq.vq.layers:
            cb = layer._codebook
            pick = torch.randint(0, x.shape[0], (cb.embedding_sum.shape[0],), generator=g)
            centres = x[pick] + 1e-4 * x.std() * torch.randn(x[pick].shape, generator=g)
            cb.embedding_sum.copy_(centres * cb.cluster_usage[:, None])
            cb.register_buffer("_embedding", None, persistent=False)  # drop the cached copy
            x = x - centres[torch.cdist(x, centres).argmin(dim=1)]


def train_tokenizer(path: Path) -> None:
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=out,
                                   vocab_size=VOCAB, model_type="unigram", unk_id=0, bos_id=1,
                                   eos_id=2, pad_id=3, minloglevel=2)
    path.write_bytes(out.getvalue())


def write_checkpoints(folder: Path, seed: int = 0) -> dict[str, str]:
    """Random tiny Mimi + LM + tokenizer + configs in ``folder``; returns the ``moshi``
    options that load them."""
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    mimi = loaders.get_mimi(None, mimi_config(), num_codebooks=8)
    with torch.no_grad():
        fit_codebooks(mimi, seed)
    lm = loaders.get_moshi_lm(None, lm_kwargs=lm_config(), dtype=torch.float32)
    files = {"mimi_weights": folder / "mimi.safetensors", "lm_weights": folder / "lm.safetensors",
             "tokenizer": folder / "tokenizer.model", "lm_config": folder / "config.json",
             "mimi_config": folder / "mimi_config.json"}
    for model, key in ((mimi, "mimi_weights"), (lm, "lm_weights")):
        save_file({k: v.detach().contiguous().clone() for k, v in model.state_dict().items()},
                  str(files[key]))
    train_tokenizer(files["tokenizer"])
    files["lm_config"].write_text(json.dumps(lm_config()), encoding="utf-8")
    files["mimi_config"].write_text(json.dumps(mimi_config()), encoding="utf-8")
    return {k: str(v) for k, v in files.items()}
