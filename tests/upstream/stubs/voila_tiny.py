"""A tiny Voila-Autonomous checkpoint, its text tokenizer and its audio tokenizer, built with
Voila's own classes (``model.VoilaAutonomousModel``, transformers' ``EncodecModel``) and set
weights, so that the authors' ``run_generate`` decides deterministically (our stub of the
networks, never their code):

* the LM's layers add nothing (their output projections are zero), so a row's hidden state is
  the mean embedding of its tokens; every token carries a constant feature, and a user frame
  whose first codebook code is not the silence code carries a "loud" one;
* the voila head says "speak" at the first row whose user frame is loud (``run_generate``
  then puts ``<|VOILA|>`` in place of that row's sampled token), the text head answers
  ``<|VOILA|>`` with ``hello``, ``hello`` with ``world``, ``world`` with the raw audio id
  ``<|5|>`` (a text row holding an audio id: no frame is pulled, as a real text head may do),
  and everything else with ``<au_token>`` (an audio row: one user frame pulled); no
  end-of-sequence, so it speaks once;
* the audio head always gives code 0, which is also the silence code: the assistant's own
  audio never reads as loud;
* the audio tokenizer is a tiny random Encodec (16 kHz, 640 samples per frame, four codebooks of
  2048 at 1.1 kbps, as Voila-Tokenizer), its first convolution made loud, whose first
  codebook's code 0 is the encoder's latent of silence and code 1 that of the test tone (the
  other codes far from both).

Run in Voila's environment with the checkout on ``sys.path``::

    python voila_tiny.py OUT --signal USER.npy

``USER.npy``: the user's input as the harness will send it (16 kHz; its tone sets code 1). It
writes ``OUT/checkpoint``, ``OUT/tokenizer`` and prints JSON: the frame at which the network
decides (the first frame whose code is loud, encoded as the bridge does: the last
``context`` + 1 frames heard) and the words it will say.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

NC, CB, HOP, SR = 4, 2048, 640, 16_000
H = 64  # the LM's hidden size
BIAS, LOUD, SAY_HELLO, SAY_WORLD, AFTER_WORLD = 0, 1, 2, 3, 4  # feature dimensions
WORDS = ["hello", "world"]
SPECIALS = ["<unk>", "<pad>", "</s>", "<s>", "<au_token>", "<|VOILA|>", "<|HUMAN|>", "<SYSTEM>",
            "</SYSTEM>", "<stream_chat>", "<chat_audio_output>", "<au_chat_ref_start>",
            "<au_chat_ref>", "<au_chat_ref_end>"]
AUDIO_BASE = 32


def text_tokenizer(folder: Path) -> dict[str, int]:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for w in WORDS:
        vocab[w] = len(vocab)
    while len(vocab) < AUDIO_BASE:  # no holes in the vocabulary
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    for i in range(NC * CB):
        vocab[f"<|{i}|>"] = AUDIO_BASE + i
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = SPECIALS + [f"<|{i}|>" for i in range(NC * CB)]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="</s>", bos_token="<s>",
                                   additional_special_tokens=specials[4:])
    fast.save_pretrained(str(folder))
    return vocab


def lm(folder: Path, vocab: dict[str, int]) -> None:
    from model import VoilaAutonomousModel  # the checkout's
    from transformers import LlamaConfig

    size = -(-(AUDIO_BASE + NC * CB) // 64) * 64
    cfg = LlamaConfig(vocab_size=size, hidden_size=H, intermediate_size=2 * H,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=4096, pad_token_id=vocab["<pad>"],
                      bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"],
                      tie_word_embeddings=False)
    cfg.num_codebooks, cfg.codebook_size = NC, CB
    model = VoilaAutonomousModel(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.model.norm.weight.fill_(1.0)
        emb = model.model.embed_tokens.weight
        emb[:, BIAS] = 1.0
        first = AUDIO_BASE  # codebook 0's ids; code 0 is silence
        emb[first + 1:first + CB, LOUD] = 1.0
        emb[vocab["<|VOILA|>"], SAY_HELLO] = 1.0
        emb[vocab["hello"], SAY_WORLD] = 1.0
        emb[vocab["world"], AFTER_WORLD] = 1.0
        head = model.lm_head.weight
        head[vocab["<au_token>"], BIAS] = 2.0
        head[vocab["hello"], SAY_HELLO] = 8.0
        head[vocab["world"], SAY_WORLD] = 8.0
        head[AUDIO_BASE + 5, AFTER_WORLD] = 8.0
        # voila head: class 1 ("speak") when the loud feature beats the constant one
        vp = model.voila_predictor[0]
        vp.weight[1, LOUD] = 4.0
        vp.weight[1, BIAS] = -0.25
        at = model.audio_transformer  # layers zero: its hidden is its input
        at.norm.weight.fill_(1.0)
        at.input_proj.weight[0, BIAS] = 1.0
        at.embeddings.weight[:, 0] = 1.0
        at.token_head.weight[0, 0] = 1.0  # code 0, always
    model.to(torch.bfloat16).save_pretrained(str(folder))  # as the bridge loads it
    (folder / "config.json").write_text(json.dumps(
        {**json.loads((folder / "config.json").read_text()), "num_codebooks": NC,
         "codebook_size": CB}, indent=1))


def codec(folder: Path, signal: np.ndarray) -> None:
    from transformers import EncodecConfig, EncodecFeatureExtractor, EncodecModel

    cfg = EncodecConfig(sampling_rate=SR, upsampling_ratios=[8, 5, 4, 4], target_bandwidths=[1.1],
                        codebook_size=CB, hidden_size=16, num_filters=4, num_lstm_layers=1,
                        use_causal_conv=True, normalize=False)
    cfg.model_version = "tiny"  # Voila-Tokenizer's config.json carries one; VoilaTokenizer reads it
    model = EncodecModel(cfg).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        # random weights barely tell a tone from silence (their latents 0.005 apart, less
        # than the LSTM's start-up transient): a louder first convolution separates them
        model.encoder.layers[0].conv.parametrizations.weight.original0.mul_(3000.0)
        for layer in model.quantizer.layers:
            layer.codebook.embed.copy_(torch.randn(CB, cfg.codebook_dim, generator=gen) * 50)
        loud = torch.from_numpy(signal[signal != 0][: 26 * HOP].copy())
        silent = model.encoder(torch.zeros(1, 1, 26 * HOP))[0, :, -1]
        toned = model.encoder(loud[None, None])[0, :, -1]
        first = model.quantizer.layers[0].codebook.embed
        first[0], first[1] = silent, toned
    model.save_pretrained(str(folder))
    EncodecFeatureExtractor(feature_size=1, sampling_rate=SR).save_pretrained(str(folder))


def decision_frame(folder: Path, signal: np.ndarray, context: int) -> int:
    """The first frame whose code is loud, each frame encoded as the bridge does (its last
    ``context`` + 1 frames) by Voila's own ``VoilaTokenizer``; frames before it must be
    silent."""
    from voila_tokenizer import VoilaTokenizer  # the checkout's

    tok = VoilaTokenizer(model_path=str(folder), device="cpu")
    for k in range(signal.size // HOP):
        window = signal[max(0, k - context) * HOP:(k + 1) * HOP]
        code = int(tok.encode(window, sr=SR)[0, -1])
        if code != 0:
            return k
    raise SystemExit("the tiny codec never hears the tone: change the tone or the seed")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--signal", type=Path, required=True)
    p.add_argument("--context", type=int, default=25)
    args = p.parse_args()
    torch.manual_seed(0)
    ckpt, tok = args.out / "checkpoint", args.out / "tokenizer"
    ckpt.mkdir(parents=True, exist_ok=True)
    tok.mkdir(parents=True, exist_ok=True)
    signal = np.load(args.signal).astype(np.float32)
    lm(ckpt, text_tokenizer(ckpt))
    codec(tok, signal)
    print(json.dumps({"decision_frame": decision_frame(tok, signal, args.context),
                      "words": WORDS, "frame": HOP, "sample_rate": SR}))


if __name__ == "__main__":
    main()
