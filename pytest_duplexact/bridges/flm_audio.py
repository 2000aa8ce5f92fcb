"""FLM-Audio (CofeAI/FLM-Audio) behind the bridge protocol, stepped: one Mimi frame per step.

Run in FLM-Audio's own environment (a checkout of cofe-ai/flm-audio with its
``requirements-server.txt`` installed, plus ``pip install --no-deps pytest-duplexact
websockets``)::

    python -m pytest_duplexact.bridges.flm_audio --port 8765 --checkpoint DIR --workaround all

``DIR`` is a local copy of the hub repository CofeAI/FLM-Audio (the LM, its tokenizer and the
Mimi file ``tokenizer-e351c8d8-checkpoint125.safetensors``); nothing is downloaded.

Written from the model's own code (cofe-ai/flm-audio): ``flmaudio/server.py`` (the frame
loop), ``flmaudio/models/streaming_flmaudio.py`` (``LMGen``), ``flmaudio/models/loaders.py``
(``get_mimi``). What is theirs and what is ours:

* Theirs, as the server does it: Mimi and ``LMGen`` stream with batch size 1 forever
  (``streaming_forever(1)``: entering streaming wraps the LM in ``torch.compile``, which
  compiles at the first steps) and are ``reset_streaming()`` per connection; four warm-up
  frames at start-up (the kit's ``warmup`` hook, before the bridge listens);
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
* Ours: FLM-Audio's code at its HEAD (cofe-ai/flm-audio@41d768c) cannot generate, and lets
  ids through that Mimi cannot decode. Each defect has a named workaround (``--workaround
  NAME``, repeatable, or ``all``; ``WORKAROUNDS`` below says what each patches and where);
  a defect found at start without its workaround refuses to start with one line naming the
  upstream file and line. The pad guard is always on: an audio id Mimi cannot decode ends
  the trial with ERROR naming ``pad-logits``, never an IndexError inside Mimi. ``top_k_audio``
  / ``top_k_text`` have no effect while the matching ``top_p_*`` > 0 (their ``sample_token``
  tests ``top_p`` first), so setting one then is refused rather than silently ignored.
* Ours: the text is sent only with ``--transcript``. The paper transcribed FLM-Audio's speech
  with whisper-1 (its Appendix D.1), and the text stream is the model's "natural monologue"
  (its paper's title), which we read as not timed word by word to the speech; without
  ``--transcript`` the plugin transcribes the audio, as for any model without words.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Iterable

import numpy as np

from .kit import BridgeModel, OptionError, Trial, log
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
# FLM-Audio's defects at cofe-ai/flm-audio@41d768c, each with the workaround of that name
WORKAROUNDS = {
    "forward-audio": "LMGen.depformer_step calls forward_audio without the step and kv_cache "
                     "arguments (flmaudio/models/streaming_flmaudio.py:179) that "
                     "FLMAudioForCausalLM.forward_audio requires (modeling_flmaudio.py:944) "
                     "and passes on to DepthGPT.forward, which takes neither (depth_gpt.py:263):"
                     " this checkout cannot generate; the workaround calls the depth "
                     "transformer with what it takes",
    "initial-tokens": "_LMGenState.reset zeroes the whole token cache "
                      "(flmaudio/models/streaming_flmaudio.py:24), the initial tokens "
                      "(streaming_flmaudio.py:79, set only when streaming starts) included: "
                      "every trial after the first would start from token 0; the workaround "
                      "writes them back after each reset",
    "pad-logits": "nothing keeps the depth heads from sampling an id Mimi cannot decode (the "
                  "audio pad id; flmaudio/models/streaming_flmaudio.py:179-194): an IndexError"
                  " in Mimi's decoder; the workaround masks those ids' logits",
}
TOP_P_FIRST = "flmaudio/third_party/moshi/utils/sampling.py:118"


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


class FlmAudioBridge(BridgeModel):
    """Loaded Mimi + ``LMGen`` + tokenizer served one trial at a time (kit contract)."""

    name = NAME
    mode = "stepped"

    def __init__(self, torch: Any, mimi: Any, lm_gen: Any, tokenizer: Any, *, device: Any,
                 text_wait_token_id: int, defaults: dict[str, Any], transcript: bool = False,
                 workarounds: Iterable[str] = (), server_given: Iterable[str] = ()):
        self.torch, self.mimi, self.lm_gen, self.tokenizer = torch, mimi, lm_gen, tokenizer
        self.transcript = transcript
        self.workarounds = frozenset(workarounds)
        self.server_given = frozenset(server_given)  # options set by the server's --option
        self.cardinality = int(getattr(mimi, "cardinality", 2048))
        self.device = device
        self.text_wait_token_id = int(text_wait_token_id)
        self.sample_rate = int(mimi.sample_rate)
        self.frame = int(mimi.sample_rate / mimi.frame_rate)  # as the server: 1920
        self.silence = np.zeros(self.frame, dtype=np.float32)
        self.defaults = defaults
        mimi.streaming_forever(1)
        lm_gen.streaming_forever(1)

    def warmup(self) -> None:
        """The server's warm-up: four frames of faint noise (compiles the LM's steps); the
        kit runs it before it listens (``--no-warmup`` skips it)."""
        rng = np.random.default_rng(0)
        for _ in range(4):
            self.compute(((rng.random(self.frame) - 0.5) * 0.002).astype(np.float32))
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def open(self, options: dict[str, str], trial: Trial) -> FlmAudioSession:
        given = set(options) | self.server_given
        o = trial_options(options, self.defaults, trial, model=NAME, torch=self.torch,
                          check=lambda o: refuse_dead_top_k(given, o))
        for key in SAMPLING:
            setattr(self.lm_gen, key, o[key])
        self.mimi.reset_streaming()
        self.reset_lm_gen()
        return FlmAudioSession(self)

    def reset_lm_gen(self) -> None:
        self.lm_gen.reset_streaming()
        if "initial-tokens" in self.workarounds:
            self.lm_gen._streaming_state.cache[:, :, 0:1] = self.lm_gen.lm_model.\
                _get_initial_token()

    def reset_loses_initial_tokens(self) -> bool:
        """Whether ``LMGen.reset_streaming`` leaves the cache without the initial tokens
        streaming started with (the ``initial-tokens`` defect)."""
        self.lm_gen.reset_streaming()
        first = self.lm_gen._streaming_state.cache[:, :, 0:1]
        lost = not bool((first == self.lm_gen.lm_model._get_initial_token()).all())
        self.reset_lm_gen()
        return lost

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
            top = int(tokens[:, 1:].max())
            if top >= self.cardinality:  # the pad guard: Mimi would fail with an IndexError
                raise RuntimeError(f"FLM-Audio sampled the audio id {top}, which Mimi cannot "
                                   f"decode (its codes are 0-{self.cardinality - 1}; nothing in "
                                   "flmaudio/models/streaming_flmaudio.py:179-194 keeps it out):"
                                   " start the bridge with --workaround pad-logits")
            pcm = self.mimi.decode(tokens[:, 1:])
            return pcm[0, 0].float().cpu().numpy(), int(tokens[0, 0, 0].item())

    def text_deltas(self) -> TextDeltas:
        return TextDeltas(self.tokenizer.decode)


# --- FLM-Audio's defects -----------------------------------------------------------------------

def refuse_dead_top_k(given: set[str], o: dict[str, Any]) -> None:
    """A ``top_k_*`` option given while its ``top_p_*`` > 0 would be silently ignored
    (``sample_token`` tests top_p first): refused, saying how to make it count."""
    for kind in ("audio", "text"):
        if f"top_k_{kind}" in given and o["use_sampling"] and o[f"top_p_{kind}"] > 0:
            raise OptionError(f"top_k_{kind} has no effect while top_p_{kind} > 0 (FLM-Audio's "
                              f"sample_token tests top_p first, {TOP_P_FIRST}): set "
                              f"top_p_{kind}=0 to sample from the top k")


def forward_audio_lacks_arguments(lm: Any) -> bool:
    """``forward_audio`` requires arguments beyond the two ``depformer_step`` passes."""
    passed = ("transformer_output_states", "audio_input_ids")
    return any(p.default is inspect.Parameter.empty and p.name not in passed and
               p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               for p in inspect.signature(lm.forward_audio).parameters.values())


def patch_forward_audio(lm: Any, *, arguments: bool, cardinality: int | None) -> None:
    """The ``forward-audio`` and ``pad-logits`` workarounds, before streaming starts (which
    compiles ``lm.forward_audio`` as it then is): the depth transformer called with the two
    arguments it takes, and/or the logits of ids >= ``cardinality`` masked."""
    original, depth = lm.forward_audio, lm.aud_output_layers

    def forward_audio(transformer_output_states, audio_input_ids, *rest, **named):
        if arguments:
            logits = depth(transformer_output_states, audio_input_ids)
        else:
            logits = original(transformer_output_states, audio_input_ids, *rest, **named)
        if cardinality is not None and logits.shape[-1] > cardinality:
            logits = logits.clone()
            logits[..., cardinality:] = float("-inf")
        return logits

    lm.forward_audio = forward_audio


def prepare_lm(lm: Any, mimi: Any, chosen: set[str]) -> list[str]:
    """The workarounds of the LM itself, before ``LMGen`` streams it: a ``forward_audio``
    that lacks arguments refuses to start without ``forward-audio``. Returns the workarounds
    applied (``initial-tokens`` is the bridge's, at each reset)."""
    lacks = forward_audio_lacks_arguments(lm)
    if lacks and "forward-audio" not in chosen:
        raise refusal("forward-audio")
    pad = "pad-logits" in chosen
    if lacks or pad:
        patch_forward_audio(lm, arguments=lacks,
                            cardinality=int(getattr(mimi, "cardinality", 2048)) if pad else None)
    return ["forward-audio"] * lacks + ["pad-logits"] * pad


def refusal(name: str) -> SystemExit:
    return SystemExit(f"{NAME} bridge: {WORKAROUNDS[name]}. Start with --workaround {name} "
                      "(or --workaround all) to run it patched (docs/models.md)")


def parse_workarounds(values: Iterable[str]) -> set[str]:
    chosen: set[str] = set()
    for value in values:
        for name in filter(None, (v.strip() for v in value.split(","))):
            if name == "all":
                chosen |= set(WORKAROUNDS)
            elif name in WORKAROUNDS:
                chosen.add(name)
            else:
                raise SystemExit(f"{NAME} bridge: --workaround {name!r}: expected one of "
                                 f"{', '.join(WORKAROUNDS)} or all")
    return chosen


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
    p.add_argument("--workaround", action="append", default=[], metavar="NAME",
                   help="patch one of FLM-Audio's own defects (repeatable, comma-separated; "
                        f"{', '.join(WORKAROUNDS)}, or all); without it a defect found at start "
                        "refuses to start, naming the upstream file and line")
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
    chosen = parse_workarounds(args.workaround)
    applied = prepare_lm(lm, mimi, chosen)
    lm_gen = models.LMGen(lm)
    given = {pair.partition("=")[0].strip() for pair in args.option}
    defaults = {"seed": 0, **{k: getattr(lm_gen, k) for k in SAMPLING}}
    defaults = server_defaults(args.option, defaults, model=NAME,
                               check=lambda o: refuse_dead_top_k(given, o))
    bridge = FlmAudioBridge(torch, mimi, lm_gen, tokenizer, device=device,
                            text_wait_token_id=lm.config.mm_token_info.text_wait_token_id,
                            defaults=defaults, transcript=args.transcript,
                            workarounds=chosen, server_given=given)
    if bridge.reset_loses_initial_tokens():
        if "initial-tokens" not in chosen:
            raise refusal("initial-tokens")
        applied.append("initial-tokens")
    if applied:
        log.info("flm-audio: working around FLM-Audio's own code: %s", ", ".join(sorted(applied)))
    return bridge  # the kit warms it up (FlmAudioBridge.warmup) before it listens


if __name__ == "__main__":
    raise SystemExit(serve_main(build, prog="python -m pytest_duplexact.bridges.flm_audio",
                                description=__doc__.split("\n\n")[0],
                                add_arguments=add_arguments))
