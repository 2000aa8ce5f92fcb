"""Voila's model API as the bridge uses it (maitrix-org/Voila: ``model.py``
``VoilaAutonomousModel.run_generate``, ``voila_tokenizer.py`` ``VoilaTokenizer``, ``spkr.py``
``SpeakerEmbedding``, ``tokenize_func.py`` ``voila_input_format``), with the real signatures
and ``run_generate``'s row order, and transparent behaviour:

* ``from_pretrained`` takes ``attn_implementation`` as transformers does and, as it does,
  refuses ``flash_attention_2`` (and the old ``use_flash_attention_2=True``) when the
  ``flash_attn`` package is not importable; the choice is kept in ``config.attn``;
* ``run_generate`` walks the checkpoint's ``script`` (config.json): a text id is a text row
  (also an id in the audio range: the real text head can sample one, and then no frame is
  pulled); ``"A"`` (and everything past the script) is an audio row, whose assistant frame is
  computed *before* the user frame of that row is pulled from ``input_generator``, as in the
  real loop (``model.py`` 1356-1372: pull, then ``streamer.put``): here it is the user frame
  pulled one audio row earlier (an echo; code 0 at first); ``streamer.put`` gets each row's
  assistant tokens; ``max_new_tokens`` caps the rows;
* ``VoilaTokenizer``: 16 kHz, upsampling ratios 8·5·4·4 = 640 samples per code frame; every
  codebook gets the frame's round(mean * SCALE) modulo ``codebook_size``; ``decode`` gives
  each code frame 640 samples of value code / SCALE.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from tests.bridges.model_stubs import SCALE

AUDIO_TOKEN_FORMAT = "<|{}|>"
DEFAULT_AUDIO_TOKEN = "<au_token>"
DEFAULT_ASSISTANT_TOKEN = "<|VOILA|>"
DEFAULT_HUMAN_TOKEN = "<|HUMAN|>"
AUDIO_SR = 16000
HOP = 640


def _config(folder) -> dict:
    return json.loads((Path(folder) / "config.json").read_text())


class VoilaAutonomousModel:
    def __init__(self, folder):
        cfg = _config(folder)
        self.config = SimpleNamespace(num_codebooks=cfg["num_codebooks"],
                                      codebook_size=cfg["codebook_size"])
        self.script = cfg["script"]
        self.calls: list[dict] = []

    @classmethod
    def from_pretrained(cls, folder, torch_dtype=None, use_flash_attention_2=False,
                        attn_implementation=None, use_cache=True):
        if use_flash_attention_2:  # transformers' deprecated spelling of the same request
            attn_implementation = "flash_attention_2"
        if attn_implementation == "flash_attention_2" and \
                importlib.util.find_spec("flash_attn") is None:
            raise ImportError("FlashAttention2 has been toggled on, but it cannot be used due "
                              "to the following error: the package flash_attn seems to be not "
                              "installed.")
        model = cls(folder)
        model.config.attn = attn_implementation
        return model

    def to(self, device):
        return self

    def eval(self):
        return self

    @torch.inference_mode()
    def run_generate(self, input_ids, input_generator, ref_embs=None, ref_embs_mask=None,
                     max_new_tokens=128, pad_token_id=None, eos_token_id=None, streamer=None,
                     llm_audio_token_id=None, min_audio_token_id=None,
                     llm_assistant_token_id=None, temperature=0.2, top_k=50,
                     audio_temperature=0.8, audio_top_k=50):
        assert eos_token_id is not None and pad_token_id is not None
        assert llm_audio_token_id is not None and min_audio_token_id is not None
        nc, cb = self.config.num_codebooks, self.config.codebook_size
        assert input_ids.dim() == 3 and input_ids.shape[2] == 2 * nc, input_ids.shape
        self.calls.append({"prompt": input_ids[0, :, 0].tolist(), "temperature": temperature,
                           "top_k": top_k, "max_new_tokens": max_new_tokens,
                           "ref_embs": ref_embs is not None})
        offsets = torch.arange(nc) * cb + min_audio_token_id
        previous = offsets.clone()  # code 0 in every codebook
        max_length = input_ids.shape[1] + max_new_tokens
        input_ids = input_ids.clone()
        i = 0
        while True:
            item = self.script[i] if i < len(self.script) else "A"
            i += 1
            if item == "A":
                next_tokens = previous
                try:
                    new_input = next(input_generator)
                except:  # noqa: E722 (the real loop's bare except)
                    break
                previous = new_input.clone()
                row = torch.cat([new_input, next_tokens])
            else:
                next_tokens = torch.full((nc,), int(item))
                row = torch.cat([next_tokens, next_tokens])
            input_ids = torch.cat([input_ids, row[None, None, :]], dim=1)
            if streamer is not None:
                streamer.put(next_tokens[None, None, :].cpu())
            if input_ids.shape[1] >= max_length:
                break
        if streamer is not None:
            streamer.end()
        return input_ids


class VoilaTokenizer:
    def __init__(self, model_path="maitrix-org/Voila-Tokenizer", bandwidth_id=0, device="cpu"):
        cfg = _config(model_path)
        self.nc, self.cb = cfg["num_codebooks"], cfg["codebook_size"]
        self.sampling_rate = AUDIO_SR
        self.model = SimpleNamespace(config=SimpleNamespace(upsampling_ratios=[8, 5, 4, 4]))

    def encode(self, wav, sr):
        x = np.asarray(wav, dtype=np.float32).reshape(-1)
        assert sr == self.sampling_rate
        frames = x.size // HOP
        codes = np.round(x[:frames * HOP].reshape(frames, HOP).mean(-1) * SCALE)
        codes = codes.astype(np.int64) % self.cb
        return torch.from_numpy(np.tile(codes, (self.nc, 1)))

    def decode(self, audio_codes):
        assert audio_codes.dim() == 2 and audio_codes.shape[0] == self.nc, audio_codes.shape
        return torch.from_numpy(np.repeat(audio_codes[0].numpy() / SCALE, HOP).astype(
            np.float32))


class SpeakerEmbedding:
    def __init__(self, model_path="pyannote/wespeaker-voxceleb-resnet34-LM", device="cuda"):
        self.sample_rate = 16000

    def __call__(self, wav, sr):
        return torch.zeros(256)


def voila_input_format(item, tokenizer, tokenizer_voila, dataset_cfg):
    assert dataset_cfg["input_type"] == "autonomous"
    assert dataset_cfg["task_type"] == "chat_aiao_auto"
    nc = dataset_cfg["num_codebooks"]
    audio = item["conversations"][0]["audio"]
    assert "array" in audio and "sr" in audio
    human = tokenizer.convert_tokens_to_ids(DEFAULT_HUMAN_TOKEN)
    ids = tokenizer.encode(item["instruction"]) + [human]
    streaming = tokenizer_voila.encode(audio["array"], sr=AUDIO_SR).tolist()
    return [[list(ids) for _ in range(nc)], [list(ids) for _ in range(nc)]], None, None, \
        streaming
