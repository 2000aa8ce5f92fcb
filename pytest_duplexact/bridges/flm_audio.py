"""FLM-Audio (CofeAI/FLM-Audio) behind the bridge protocol, stepped: one Mimi frame per step.

Run in FLM-Audio's own environment (a checkout of cofe-ai/flm-audio with its
``requirements-server.txt`` installed, plus ``pip install --no-deps pytest-duplexact
websockets``)::

    python -m pytest_duplexact.bridges.flm_audio --port 8765 --checkpoint DIR

``DIR`` is a local copy of the hub repository CofeAI/FLM-Audio (the LM, its tokenizer and the
Mimi file ``tokenizer-e351c8d8-checkpoint125.safetensors``); nothing is downloaded.

Written from the model's own code (cofe-ai/flm-audio): ``flmaudio/server.py`` (the frame
loop), ``flmaudio/models/streaming_flmaudio.py`` (``LMGen``), ``flmaudio/models/loaders.py``
(``get_mimi``). What is theirs and what is ours:

* Theirs, as the server does it: Mimi and ``LMGen`` stream with batch size 1 forever
  (``streaming_forever(1)``: entering streaming compiles the LM, so it happens once, at
  start-up) and are ``reset_streaming()`` per connection; four warm-up frames at start-up;
  each 1920-sample frame at 24 kHz is ``mimi.encode``-d, each code frame given to
  ``lm_gen.step``; the tokens it returns (``None`` for the first ``max_delay`` steps) are
  ``mimi.decode(tokens[:, 1:])``-d; the text token ``tokens[0, 0, 0]`` is dropped when it is 0
  or 3, ends the current text segment when it is the config's ``text_wait_token_id``, and is
  otherwise text, decoded with the checkpoint's own tokenizer. The sampling settings are
  ``LMGen``'s own keyword arguments, set per trial as the server's ``/api/settings`` sets them.
  Unlike moshi's server, FLM-Audio's does not reset Mimi after the first frame; neither do we.
* Ours: the clock. As for Moshi (``models/moshi.py``), the audio and text decoded after input
  frame k are answered in step k + 1: the model needs all of frame k before it can answer,
  so a real-time deployment cannot play that audio earlier. A text segment's pieces are
  decoded incrementally (``modelkit.TextDeltas``) rather than through the server's
  ``AsyncTextIteratorStreamer``, which holds text back to word ends; each piece is timed at
  the step whose audio it was decoded with. Sampling is seeded per trial from the run's seed
  and the ``seed`` option (the server seeds once with 42).
* Ours: the text is sent only with ``--transcript``. The paper transcribed FLM-Audio's speech
  with whisper-1 (its Appendix D.1), and the text stream is the model's "natural monologue"
  (its paper's title), which we read as not timed word by word to the speech; without
  ``--transcript`` the plugin transcribes the audio, as for any model without words.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .kit import Trial
from .kit import main as serve_main
from .modelkit import (
    TextDeltas,
    add_option_flag,
    import_model,
    local_dir,
    server_defaults,
    trial_options,
)

NAME = "flm-audio"
MIMI_FILE = "tokenizer-e351c8d8-checkpoint125.safetensors"  # flmaudio/models/loaders.py
SKIPPED_TEXT_IDS = (0, 3)  # flmaudio/server.py: never text
INSTALL = ("clone cofe-ai/flm-audio, `pip install -r requirements-server.txt` there and run "
           "from the checkout (or pass --flm-repo), then `pip install --no-deps "
           "pytest-duplexact websockets`")
# LMGen's keyword arguments (streaming_flmaudio.py), settable per trial as /api/settings does
SAMPLING = ("use_sampling", "temp_audio", "temp_text", "top_k_audio", "top_k_text",
            "top_p_audio", "top_p_text", "repetition_penalty_audio", "repetition_penalty_text",
            "repetition_penalty_window_audio", "repetition_penalty_window_text")


class FlmAudioSession:
    """One trial: the answer to each frame is held for one step (module doc)."""

    def __init__(self, bridge: "FlmAudioBridge"):
        self.b = bridge
        self._pending: tuple[np.ndarray, int | None] | None = None
        self._text = bridge.text_deltas()

    def step(self, frame: np.ndarray) -> tuple[np.ndarray, list[str]]:
        b = self.b
        answer = b.compute(frame)
        audio, text_id = self._pending or (b.silence, None)
        self._pending = answer
        return audio, self._texts(text_id)

    def _texts(self, text_id: int | None) -> list[str]:
        if not self.b.transcript or text_id is None or text_id in SKIPPED_TEXT_IDS:
            return []
        if text_id == self.b.text_wait_token_id:
            return [self._text.end()]
        return [self._text.feed(text_id)]

    def close(self) -> None:
        self._pending = None


class FlmAudioBridge:
    """Loaded Mimi + ``LMGen`` + tokenizer served one trial at a time (kit contract)."""

    name = NAME
    mode = "stepped"

    def __init__(self, torch: Any, mimi: Any, lm_gen: Any, tokenizer: Any, *, device: Any,
                 text_wait_token_id: int, defaults: dict[str, Any], transcript: bool = False):
        self.torch, self.mimi, self.lm_gen, self.tokenizer = torch, mimi, lm_gen, tokenizer
        self.transcript = transcript
        self.device = device
        self.text_wait_token_id = int(text_wait_token_id)
        self.sample_rate = int(mimi.sample_rate)
        self.frame = int(mimi.sample_rate / mimi.frame_rate)  # as the server: 1920
        self.silence = np.zeros(self.frame, dtype=np.float32)
        self.defaults = defaults
        mimi.streaming_forever(1)
        lm_gen.streaming_forever(1)

    def warmup(self) -> None:
        """The server's warm-up: four frames of faint noise (compiles the LM's steps)."""
        rng = np.random.default_rng(0)
        for _ in range(4):
            self.compute(((rng.random(self.frame) - 0.5) * 0.002).astype(np.float32))
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def open(self, options: dict[str, str], trial: Trial) -> FlmAudioSession:
        o = trial_options(options, self.defaults, trial, model=NAME, torch=self.torch)
        for key in SAMPLING:
            setattr(self.lm_gen, key, o[key])
        self.mimi.reset_streaming()
        self.lm_gen.reset_streaming()
        return FlmAudioSession(self)

    def compute(self, frame: np.ndarray) -> tuple[np.ndarray, int | None] | None:
        """The server's ``decode_step`` for one frame: (audio, text id), or None while
        ``LMGen`` is still inside its delay."""
        torch = self.torch
        with torch.no_grad():  # grad mode is per thread: the kit steps in a worker thread
            x = torch.from_numpy(np.array(frame, dtype=np.float32)).to(self.device)[None, None]
            codes = self.mimi.encode(x)
            if codes.shape[-1] != 1:
                raise RuntimeError(f"Mimi gave {codes.shape[-1]} code frames for one "
                                   f"{self.frame}-sample frame; expected 1")
            tokens = self.lm_gen.step(codes[:, :, 0:1])
            if tokens is None:
                return None
            pcm = self.mimi.decode(tokens[:, 1:])
            return pcm[0, 0].float().cpu().numpy(), int(tokens[0, 0, 0].item())

    def text_deltas(self) -> TextDeltas:
        return TextDeltas(self.tokenizer.decode)


# --- loading ----------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="local copy of CofeAI/FLM-Audio (LM, tokenizer, Mimi file)")
    p.add_argument("--mimi", metavar="DIR", help=f"folder holding {MIMI_FILE} (default: "
                                                 "--checkpoint)")
    p.add_argument("--flm-repo", metavar="DIR",
                   help="a cofe-ai/flm-audio checkout, when flmaudio is not importable as is")
    p.add_argument("--device", default="cuda", help="torch device (default cuda, as the "
                                                    "server)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"),
                   help="the LM's dtype (default bfloat16, as the server); Mimi stays float32")
    p.add_argument("--no-warmup", action="store_true", help="skip the four warm-up frames")
    p.add_argument("--transcript", action="store_true",
                   help="send the text stream as the model's words (default off: the paper "
                        "transcribed FLM-Audio's speech with whisper-1; its text is a "
                        "monologue, not timed to the speech)")
    add_option_flag(p, ("seed",) + SAMPLING)


def build(args: argparse.Namespace) -> FlmAudioBridge:
    ckpt = local_dir("--checkpoint", args.checkpoint, model=NAME, holds=("config.json",))
    mimi_dir = local_dir("--mimi", args.mimi or args.checkpoint, model=NAME,
                         holds=(MIMI_FILE,))  # else get_mimi would download it
    torch = import_model("torch", model=NAME, install=INSTALL)
    models = import_model("flmaudio.models", model=NAME, install=INSTALL, path=args.flm_repo)
    transformers = import_model("transformers", model=NAME, install=INSTALL)
    device = torch.device(args.device)
    mimi = models.get_mimi(str(mimi_dir), args.device)
    lm = models.FLMAudioForCausalLM.from_pretrained(
        str(ckpt), device_map=args.device, torch_dtype=getattr(torch, args.dtype),
        low_cpu_mem_usage=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(ckpt))
    lm_gen = models.LMGen(lm)
    defaults = {"seed": 0, **{k: getattr(lm_gen, k) for k in SAMPLING}}
    defaults = server_defaults(args.option, defaults, model=NAME)
    bridge = FlmAudioBridge(torch, mimi, lm_gen, tokenizer, device=device,
                            text_wait_token_id=lm.config.mm_token_info.text_wait_token_id,
                            defaults=defaults, transcript=args.transcript)
    if not args.no_warmup:
        bridge.warmup()
    return bridge


if __name__ == "__main__":
    raise SystemExit(serve_main(build, prog="python -m pytest_duplexact.bridges.flm_audio",
                                description=__doc__.split("\n\n")[0],
                                add_arguments=add_arguments))
