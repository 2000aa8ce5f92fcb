"""Write a tiny random FLM-Audio checkpoint folder with FLM-Audio's own classes (run in its
environment, with ``sitecustomize.py`` beside this file first on ``PYTHONPATH`` so that Mimi is
the shrunk one): ``config.json`` + weights (``FLMAudioForCausalLM.save_pretrained``), a
word-level text tokenizer (``tokenizer.json``), and the Mimi file the bridge loads through
``get_mimi``. Nothing is downloaded.

    python build.py OUT --flm-repo CHECKOUT
"""

import argparse
import sys
from pathlib import Path

MIMI_NAME = "tokenizer-e351c8d8-checkpoint125.safetensors"
WORDS = ["hello", "there", "how", "are", "you", "today", "sure", "okay", "thanks", "plan",
         "wait", "museum", "friday", "good", "really", "tell"]
WAIT_ID = 5  # text_wait_token_id; 0 and 3 are never text (flmaudio/server.py)
TEXT_VOCAB = 32
PAD, EMPTY = 2048, 2049  # the audio pad and "empty" ids, past Mimi's 2048 codes


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--flm-repo", required=True)
    args = p.parse_args()
    sys.path.insert(0, args.flm_repo)
    import torch
    from flmaudio.models import FLMAudioForCausalLM, loaders
    from flmaudio.models.configuration_flmaudio import FLMAudioConfig
    from safetensors.torch import save_model
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = FLMAudioConfig(
        vocab_size=TEXT_VOCAB, aud_vocab_size=EMPTY + 1, aud_channel=8, hidden_size=64,
        intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
        mm_token_info={"text_wait_token_id": WAIT_ID, "aud_pad_token_id": PAD,
                       "aud_emp_token_id": EMPTY},
        aud_depthgpt={"n_layer": 1, "n_head": 2, "n_embd": 32, "dropout": 0.0, "bias": False,
                      "use_cmlp": False, "use_rmsnorm": True, "use_swiglu": False})
    FLMAudioForCausalLM(config).save_pretrained(out)

    vocab = {f"<s{k}>": k for k in range(TEXT_VOCAB - len(WORDS))}
    vocab.update({w: len(vocab) + k for k, w in enumerate(WORDS)})
    vocab["[UNK]"] = vocab.pop("<s4>")  # an id that is no control id of the bridge's
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(out)

    save_model(_random_mimi(loaders), str(out / MIMI_NAME))
    print(out)


def _random_mimi(loaders):
    """``get_mimi``'s own model (the shrunk architecture), with nothing loaded into it: its
    random weights, and random codebooks (zero ones would decode every code alike)."""
    import torch

    loaders.load_model = lambda model, filename, device: None  # our seam: load nothing
    mimi = loaders._get_mimi(Path("random.safetensors"), device="cpu")
    with torch.no_grad():
        for name, buf in mimi.named_buffers():
            if name.endswith("embedding_sum"):
                buf.normal_()
    return mimi


if __name__ == "__main__":
    main()
