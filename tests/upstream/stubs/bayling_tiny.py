"""Tiny BayLing-Duplex checkpoints, built with the classes the authors' code loads, with set
weights so that ``BayLingDuplex.stream_audio_tokens`` decides deterministically (our stub of
the networks, never their code):

* the LM (``--model-path``): BayLing's is ChatGLM, whose model and tokenizer code ship with the
  weights (``trust_remote_code``), so a tiny Llama stands in, loaded the same way (``auto_map``
  to ``modeling_tiny.py``, written here; it takes the legacy cache tuples BayLing's
  ``_patch_model_for_new_transformers`` hands it, as ChatGLM's code does). Its layers add
  nothing, so the logits after a token depend on that token alone: after a user speech token
  whose code is "loud" (not 0) the text head says ``<|assistant|>``, then ``hello``, ``world``,
  ``[EPAD]``, and after the reply ``stray`` (a word outside any reply: no segment holds it);
  after anything else ``[SILENCE]``; the speech head always says code 1;
* the speech tokenizer (``--speech-tokenizer-path``): the repo's ``WhisperVQEncoder``, tiny, its
  first convolution the difference of the 440 Hz mel band and the top one (0 for silence at
  any level, large for the test tone), no positions, its layer adding nothing, so code 0 is
  silence and code 1 the tone;
* the decoder (``--decoder-path``): ``config.yaml`` (ours: GLM-4-Voice's is not public in a
  repository) building the repo's ``MaskedDiffWithXvec`` flow (Conformer encoder, conditional
  flow matching) and ``HiFTGenerator`` vocoder, tiny and random, and their ``flow.pt`` /
  ``hift.pt``.

Run in BayLing's environment with the checkout on ``sys.path``: ``python bayling_tiny.py OUT``
writes ``OUT/model``, ``OUT/speech_tokenizer``, ``OUT/speech_decoder`` and prints JSON (the
words it says, the speech codes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

N_AUDIO = 64  # speech codes (GLM-4-Voice's tokenizer has 16384)
H = 64
BIAS, LOUD, SAID_ASSISTANT, SAID_HELLO, SAID_WORLD, SAID_EPAD = range(6)
WORDS = ["hello", "world"]
STRAY = "stray"  # a word the text head says outside any reply
SPECIALS = ["<unk>", "<|endoftext|>", "<|user|>", "<|assistant|>", "[SILENCE]", "[PAD]",
            "[EPAD]"]
AUDIO_BASE = 16
TONE_HZ = 440.0

MODELING = '''"""A tiny Llama standing in for ChatGLM (the BayLing-Duplex upstream harness's stub):
ChatGLM's remote code takes legacy cache tuples, so this one does too."""
from transformers import LlamaForCausalLM
from transformers.cache_utils import DynamicCache


class TinyLM(LlamaForCausalLM):
    def forward(self, *args, past_key_values=None, **kwargs):
        if isinstance(past_key_values, tuple):
            past_key_values = DynamicCache.from_legacy_cache(past_key_values)
        return super().forward(*args, past_key_values=past_key_values, **kwargs)
'''

DECODER_YAML = """\
flow: !new:cosyvoice.flow.flow.MaskedDiffWithXvec
    input_size: 32
    output_size: 80
    spk_embed_dim: 192
    output_type: 'mel'
    vocab_size: {n_audio}
    input_frame_rate: 12.5
    only_mask_loss: True
    encoder: !new:cosyvoice.transformer.encoder.ConformerEncoder
        input_size: 32
        output_size: 32
        attention_heads: 2
        linear_units: 64
        num_blocks: 1
        dropout_rate: 0.0
        positional_dropout_rate: 0.0
        attention_dropout_rate: 0.0
        normalize_before: True
        input_layer: 'linear'
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        use_cnn_module: False
        macaron_style: False
    length_regulator: !new:cosyvoice.flow.length_regulator.InterpolateRegulator
        channels: 80
        sampling_ratios: [1]
    decoder: !new:cosyvoice.flow.flow_matching.ConditionalCFM
        in_channels: 240
        n_spks: 1
        spk_emb_dim: 80
        cfm_params: !new:omegaconf.DictConfig
            content:
                sigma_min: 1e-06
                solver: 'euler'
                t_scheduler: 'cosine'
                training_cfg_rate: 0.2
                inference_cfg_rate: 0.7
                reg_loss_type: 'l1'
        estimator: !new:cosyvoice.flow.decoder.ConditionalDecoder
            in_channels: 320
            out_channels: 80
            channels: [32]
            dropout: 0.0
            attention_head_dim: 16
            n_blocks: 1
            num_mid_blocks: 1
            num_heads: 2
            act_fn: 'gelu'
hift: !new:cosyvoice.hifigan.generator.HiFTGenerator
    in_channels: 80
    base_channels: 16
    nb_harmonics: 8
    sampling_rate: 22050
    nsf_alpha: 0.1
    nsf_sigma: 0.003
    nsf_voiced_threshold: 10
    upsample_rates: [8, 8]
    upsample_kernel_sizes: [16, 16]
    istft_params:
        n_fft: 16
        hop_len: 4
    resblock_kernel_sizes: [3, 7, 11]
    resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    source_resblock_kernel_sizes: [7, 11]
    source_resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5]]
    lrelu_slope: 0.1
    audio_limit: 0.99
    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.ConvRNNF0Predictor
        num_class: 1
        in_channels: 80
        cond_channels: 16
"""


def language_model(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for w in WORDS + [STRAY]:
        vocab[w] = len(vocab)
    while len(vocab) < AUDIO_BASE:
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    for i in range(N_AUDIO):
        vocab[f"<|audio_{i}|>"] = AUDIO_BASE + i
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|endoftext|>",
                            additional_special_tokens=SPECIALS[1:]
                            + [f"<|audio_{i}|>" for i in range(N_AUDIO)]
                            ).save_pretrained(str(folder))
    cfg = LlamaConfig(vocab_size=AUDIO_BASE + N_AUDIO, hidden_size=H, intermediate_size=2 * H,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=8192, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.model.norm.weight.fill_(1.0)
        emb, head = model.model.embed_tokens.weight, model.lm_head.weight
        emb[:, BIAS] = 1.0
        emb[AUDIO_BASE + 1:AUDIO_BASE + N_AUDIO, LOUD] = 1.0
        emb[vocab["<|assistant|>"], SAID_ASSISTANT] = 1.0
        emb[vocab["hello"], SAID_HELLO] = 1.0
        emb[vocab["world"], SAID_WORLD] = 1.0
        emb[vocab["[EPAD]"], SAID_EPAD] = 1.0
        head[vocab["[SILENCE]"], BIAS] = 2.0
        head[vocab["<|assistant|>"], LOUD] = 8.0
        head[vocab["hello"], SAID_ASSISTANT] = 8.0
        head[vocab["world"], SAID_HELLO] = 8.0
        head[vocab["[EPAD]"], SAID_WORLD] = 8.0
        head[vocab[STRAY], SAID_EPAD] = 8.0
        head[AUDIO_BASE + 1, BIAS] = 4.0  # speech: code 1, always
    model.save_pretrained(str(folder))
    (folder / "modeling_tiny.py").write_text(MODELING)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_tiny.TinyLM"}
    (folder / "config.json").write_text(json.dumps(config, indent=1))


def speech_tokenizer(folder: Path) -> None:
    import numpy as np
    from bayling_duplex_runtime.speech_tokenizer.configuration_whisper import WhisperVQConfig
    from bayling_duplex_runtime.speech_tokenizer.modeling_whisper import WhisperVQEncoder
    from transformers import WhisperFeatureExtractor

    fe = WhisperFeatureExtractor(feature_size=80, sampling_rate=16_000)
    cfg = WhisperVQConfig(num_mel_bins=80, d_model=16, encoder_layers=1, encoder_attention_heads=2,
                          encoder_ffn_dim=32, decoder_layers=1, decoder_attention_heads=2,
                          decoder_ffn_dim=32, pooling_kernel_size=4, pooling_type="avg",
                          pooling_position=1, quantize_vocab_size=N_AUDIO, quantize_position=1,
                          quantize_encoder_only=True)
    enc = WhisperVQEncoder(cfg).eval()
    t = np.arange(16_000) / 16_000
    mel = fe([np.sin(2 * np.pi * TONE_HZ * t).astype(np.float32) * 0.3], sampling_rate=16_000,
             return_tensors="np").input_features[0][:, :100].mean(axis=1)
    band, top = int(mel.argmax()), 79
    with torch.no_grad():
        for p in enc.parameters():
            p.zero_()
        for name, p in enc.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                p.fill_(1.0)
        enc.conv1.weight[0, band, 1], enc.conv1.weight[0, top, 1] = 1.0, -1.0
        enc.conv2.weight[0, 0, 1] = 1.0
        gen = torch.Generator().manual_seed(0)
        enc.codebook.weight.copy_(torch.randn(N_AUDIO, 16, generator=gen) * 100)
        enc.codebook.weight[0] = 0.0  # silence: the band difference is 0
        loud = torch.nn.functional.gelu(torch.nn.functional.gelu(
            torch.tensor(float(mel[band] - mel[top]))))
        enc.codebook.weight[1] = 0.0
        enc.codebook.weight[1, 0] = loud
    enc.save_pretrained(str(folder))
    fe.save_pretrained(str(folder))


def decoder(folder: Path) -> None:
    from hyperpyyaml import load_hyperpyyaml

    text = DECODER_YAML.format(n_audio=N_AUDIO)
    (folder / "config.yaml").write_text(text)
    torch.manual_seed(0)
    built = load_hyperpyyaml(text)
    torch.save(built["flow"].state_dict(), folder / "flow.pt")
    torch.save(built["hift"].state_dict(), folder / "hift.pt")


def fade_on_cpu(decoder_dir: Path) -> str:
    """The authors' ``AudioDecoder`` on the CPU, two streaming calls outside inference mode
    (as BayLing's own ``stream_tokens_to_audio`` makes them): the error of the second, whose
    ``fade_in_out`` cross-fades, or "" if none."""
    from bayling_duplex_runtime.flow_inference import AudioDecoder

    dec = AudioDecoder(str(decoder_dir / "config.yaml"), str(decoder_dir / "flow.pt"),
                       str(decoder_dir / "hift.pt"), device="cpu")
    tokens = torch.ones(1, 10, dtype=torch.int64)
    try:
        with torch.no_grad():
            for _ in range(2):
                dec.token2wav(tokens, uuid="probe", finalize=False)
    except RuntimeError as e:
        return str(e)
    return ""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--fade-on-cpu", action="store_true",
                   help="only report what the decoder's cross-fade does on the CPU")
    args = p.parse_args()
    import bayling_duplex.duplex  # noqa: F401  (puts the runtime and Matcha-TTS on sys.path)

    if args.fade_on_cpu:
        print(json.dumps({"fade_error": fade_on_cpu(args.out / "speech_decoder")}))
        return

    parts = {"model": language_model, "speech_tokenizer": speech_tokenizer,
             "speech_decoder": decoder}
    for name, build in parts.items():
        (args.out / name).mkdir(parents=True, exist_ok=True)
        build(args.out / name)
    print(json.dumps({"words": WORDS, "outside": STRAY, "speech_code": 1,
                      "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
