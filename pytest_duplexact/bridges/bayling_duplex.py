"""BayLing-Duplex (BayLing-Models/BayLing-Duplex) behind the bridge protocol, stepped: one
speech token (80 ms) per step, the model run once per 800 ms block.

Run in BayLing-Duplex's own environment (its ``requirements.txt`` and ``pip install -e .``,
plus ``pip install --no-deps`` a wheel of pytest-duplexact and ``websockets``,
docs/bridge-protocol.md §8), with the three folders its README
downloads::

    python -m pytest_duplexact.bridges.bayling_duplex --port 8765 \\
        --model-path models/bayling_duplex_model --speech-tokenizer-path models/speech_tokenizer \\
        --decoder-path models/speech_decoder

Written from the model's own code (``bayling_duplex/duplex.py``, ``cli.py``, README). What is
theirs and what is ours:

* Theirs: ``BayLingDuplex(model_path, speech_tokenizer_path, decoder_path, interleave_ratio,
  device, torch_dtype)``; ``create_stream_state()`` per trial; ``stream_audio_tokens(tokens,
  state=..., temperature, top_p, silence_penalty, max_epad_count)`` once per block of
  ``x`` user speech tokens (``interleave_ratio`` x:y:z, default 10:5:10; 12.5 tokens/s, so a
  block is 800 ms), yielding ``y`` text events and one audio event of ``z`` tokens;
  ``stream_tokens_to_audio(tokens, stream_id, finalize)`` at 22,050 Hz;
  ``tokenize_audio((waveform, rate))``, which resamples to 16 kHz itself and works in 30 s
  windows. Sampling defaults are ``stream_audio_tokens``'s (temperature 0.8, top_p 0.8, as
  the README's command). ``max_epad_count`` defaults to 1 there, which stops decoding after
  the first reply; here it defaults to 1,000,000 so a session runs to its end (the README
  raises it to 2 for interruptions). A trial whose model stops (an end-of-text token) is
  silent from then on, once its last speech is out.
* Ours, the speech: BayLing's code never calls ``stream_tokens_to_audio`` itself, so how to
  feed it is our reading of ``bayling_duplex_runtime/flow_inference.py``: a call that is not
  final keeps the mel of its last ``token_overlap_len`` (5) tokens back and cross-fades it
  into the start of the next call, so each call must begin with those 5 tokens again
  (CosyVoice's overlapping windows); blocks passed without them would lose half their
  speech. So block b goes to the decoder after block b-1's last 5 tokens, and when the model
  stops, those are flushed with ``finalize=True``. That lookahead delays the speech by 5
  tokens (400 ms): the speech of block b (decoded after its last input frame) plays from
  400 ms into block b+1. Each call's audio is played in order; when it falls short, the
  gap is silence, counted as underruns in the log line (the silence after the model
  stopped and its last speech played is not a gap, and is not counted).
* Ours, the decoder on CPU: ``flow_inference.py``'s ``fade_in_out`` (line 14) writes in
  place into the flow's mel, a tensor made under ``torch.inference_mode`` (``flow.py``'s
  ``inference``). On CUDA its ``.cpu()`` makes a copy first; on CPU it is the same tensor, and
  torch refuses the write outside inference mode: the second decoder call of every trial
  fails. ``--decoder-inference-mode auto`` (the default) runs the decoder calls under
  ``torch.inference_mode`` when the model is on the CPU (the same arithmetic, allowed there),
  and as BayLing's code does elsewhere; ``on`` / ``off`` force it; ``off`` on the CPU is
  refused at start in one line.
* Ours, the clock: each step is one speech token; text token t (counted over the trial) is
  heard at ``t * x / y / 12.5 + x / 12.5`` seconds (the times ``duplex.py``'s
  ``_build_segment`` gives its segments) plus the same 400 ms, and its piece is sent in that
  step (160 ms apart at 10:5:10); a piece that continues a word (no leading space) is sent
  in the step after the word's previous piece instead, since the plugin's client ends a word
  at a step without text (models/words.py): a word starts at its first token's time and
  lasts one step per piece.
* Ours, the warm-up: ``warmup()`` steps one block of silence before the first client (when
  the kit runs a model's warm-up), so the LM, the speech tokenizer and the decoder have each
  run once.
* Ours, the input: by default (``tokenize=window``) each block's tokens come from
  re-tokenizing the current 30 s window of what was heard so far, the windows ``generate``'s
  ``tokenize_audio`` uses, so the Whisper tokenizer sees the context it sees offline (that
  the result equals offline tokens is unverified); ``tokenize=block`` tokenizes each 800 ms
  block alone (cheaper; whether the model was trained on such tokens is unverified too).
* Text (sent by default: the paper scored BayLing-Duplex by its native streaming transcript,
  its Appendix D.1; ``--no-transcript`` turns it off): only a reply's text ids, from
  ``<|assistant|>`` to ``[EPAD]`` (or the trial's end), decoded with the model's tokenizer as
  a whole (``modelkit.TextDeltas``), as ``_extract_segments`` and ``_decode_text`` make a
  segment's text; ids whose own text is empty (``[SILENCE]``, ``[PAD]`` and the other
  specials ``_decode_one_text_token`` blanks) are left out. A word the text head samples
  outside a reply belongs to no segment, so in BayLing's own reading it is not said: it is
  not sent (it would be a word with no speech under it).
"""

from __future__ import annotations

import argparse
import logging
import uuid
from typing import Any, Callable, Sequence

import numpy as np

from .kit import BridgeModel, OptionError, Trial
from .kit import main as serve_main
from .modelkit import (
    FrameQueue,
    TextDeltas,
    add_option_flag,
    import_model,
    local_dir,
    server_defaults,
    trial_options,
)

NAME = "bayling-duplex"
TOKEN_RATE = 12.5  # speech tokens per second (duplex.py: time_offset = x_ratio / 12.5)
WINDOW_S = 30  # tokenize_audio's window
INSTALL = ("clone BayLing-Models/BayLing-Duplex, `pip install -r requirements.txt && pip "
           "install -e .` there, then `pip install --no-deps pytest-duplexact websockets`")
TOKENIZE_MODES = ("window", "block")
DEFAULTS: dict[str, Any] = {"temperature": 0.8, "top_p": 0.8, "silence_penalty": 0.0,
                            "max_epad_count": 1_000_000, "tokenize": "window", "seed": 0}
log = logging.getLogger("pytest_duplexact.bridges.bayling_duplex")


class BlockTokens:
    """The user's speech tokens, ``n`` at a time, from the audio heard so far.

    ``tokenize(samples) -> ids`` is the model's tokenizer on audio at the bridge's rate,
    ``samples_per_token`` that rate's samples per token. With ``window_tokens`` (the 30 s
    window), the tokens of a block come from tokenizing its window from the window's start up
    to the block's end; without, from the block's audio alone."""

    def __init__(self, tokenize: Callable[[np.ndarray], Sequence[int]], samples_per_token: int,
                 window_tokens: int | None):
        self._tokenize = tokenize
        self.spt = samples_per_token
        self.window = window_tokens
        self._buf = np.zeros(0, dtype=np.float32)
        self._origin = 0  # sample index of _buf[0]
        self.done = 0  # tokens handed out

    def add(self, samples: np.ndarray) -> None:
        self._buf = np.concatenate([self._buf, np.asarray(samples, dtype=np.float32)])

    def take(self, n: int) -> list[int]:
        a, b = self.done, self.done + n
        if (b * self.spt - self._origin) > self._buf.size:
            raise ValueError(f"{n} tokens need {b * self.spt} samples; have "
                             f"{self._origin + self._buf.size}")
        if self.window is None:
            spans = [(a, a, b)]
        else:
            w = self.window
            spans = [(k * w, max(a, k * w), min(b, (k + 1) * w))
                     for k in range(a // w, (b - 1) // w + 1)]
        out: list[int] = []
        for start, lo, hi in spans:  # tokenize [start, hi), keep [lo, hi)
            ids = list(self._tokenize(self._samples(start, hi)))
            if len(ids) < hi - start:
                raise RuntimeError(f"the speech tokenizer gave {len(ids)} tokens for "
                                   f"{(hi - start) / TOKEN_RATE:.2f} s of audio; expected "
                                   f"{hi - start}")
            out += ids[lo - start:hi - start]
        self.done = b
        keep_from = (b if self.window is None else (b // self.window) * self.window) * self.spt
        self._buf = self._buf[keep_from - self._origin:]
        self._origin = keep_from
        return out

    def _samples(self, first_token: int, end_token: int) -> np.ndarray:
        return self._buf[first_token * self.spt - self._origin:end_token * self.spt -
                         self._origin]


class BayLingSession:
    def __init__(self, bridge: "BayLingBridge", o: dict[str, Any], trial: Trial):
        m = bridge.model
        self.b, self.o, self.trial = bridge, o, trial
        self.state = m.create_stream_state()
        self.stream_id = f"duplexact-{uuid.uuid4()}"
        self.tokens = BlockTokens(bridge.tokenize, bridge.frame,
                                  bridge.window_tokens if o["tokenize"] == "window" else None)
        self.audio = FrameQueue(bridge.frame)
        # the decoder's lookahead (flow_inference.py: token_overlap_len): the tokens a call
        # holds back, fed again at the start of the next call
        self.overlap = int(getattr(m.decoder, "token_overlap_len", 0) or 0)
        self._tail: list[int] = []  # the last block's held-back tokens
        self._decoded = 0  # decoder calls so far
        self.text = TextDeltas(lambda ids: m.tokenizer.decode(ids, skip_special_tokens=False))
        self.timed: list[tuple[int, str]] = []  # (step it is heard in, piece)
        self.k = 0  # step = speech token index
        self.n_text = 0  # text tokens so far
        self.in_reply = False  # between <|assistant|> and [EPAD]
        self._last_at = -1  # the step of the last piece

    def step(self, frame: np.ndarray) -> tuple[np.ndarray, list[str]]:
        out = self.audio.pop()  # before this step's block: its speech plays from the next
        self.tokens.add(frame)
        if (self.k + 1) % self.b.x == 0:
            self._block()
        now = [piece for at, piece in self.timed if at <= self.k]
        self.timed = [(at, piece) for at, piece in self.timed if at > self.k]
        self.k += 1
        return out, now

    def _block(self) -> None:
        b, m, o = self.b, self.b.model, self.o
        if self.state.stop_requested:  # the model ended its session: nothing more to hear
            return
        ids = self.tokens.take(b.x)
        with b.torch.no_grad():  # grad mode is per thread: the kit steps in a worker thread
            for ev in m.stream_audio_tokens(ids, state=self.state, temperature=o["temperature"],
                                            top_p=o["top_p"],
                                            silence_penalty=o["silence_penalty"],
                                            max_epad_count=o["max_epad_count"]):
                if ev.kind == "text":
                    # _build_segment's start_time, plus the decoder's lookahead
                    heard = b.x + self.overlap + (self.n_text * b.x) // b.y
                    self.n_text += 1
                    piece = self._piece(ev) if b.transcript else ""
                    if piece:
                        self._add(heard, piece)
                elif ev.kind == "audio" and ev.audio_tokens:
                    self._speak(list(ev.audio_tokens))
            if self.state.stop_requested:
                if self._tail:  # the model's last words: flush
                    self._decode(self._tail, finalize=True)
                    self._tail = []
                self.audio.finish()  # silence from here on is the model's, not a gap

    def _speak(self, block: list[int]) -> None:
        """One block's speech tokens to the decoder, after the previous block's held-back
        tail (module doc); the first block's audio starts ``overlap`` tokens late, so every
        token is heard ``overlap`` tokens after its place."""
        if self._decoded == 0:
            self.audio.push(np.zeros(self.overlap * self.b.frame, dtype=np.float32))
        self._decode(self._tail + block, finalize=False)
        self._tail = block[-self.overlap:] if self.overlap else []

    def _decode(self, tokens: list[int], finalize: bool) -> None:
        with self.b.decoder_mode():  # fade_in_out on CPU (module doc)
            pcm = self.b.model.stream_tokens_to_audio(tokens, self.stream_id,
                                                      finalize=finalize)
        self.audio.push(pcm.reshape(-1).float().cpu().numpy())
        self._decoded += 1

    def _add(self, heard: int, piece: str) -> None:
        """A piece that continues a word goes out in the step after the word's previous
        piece (if that is not past), not two steps later: the plugin's client ends a word
        at a step without text, which would split it (module doc)."""
        if not piece[:1].isspace() and self._last_at >= 0:
            heard = max(self.k, min(heard, self._last_at + 1))
        self._last_at = heard
        self.timed.append((heard, piece))

    def _piece(self, ev: Any) -> str:
        """A text event's piece: only inside a reply (module doc)."""
        if ev.assistant_started or ev.assistant_finished:
            self.in_reply = bool(ev.assistant_started)
            return self.text.end()
        return self.text.feed(ev.token_id) if ev.text and self.in_reply else ""

    def close(self) -> None:
        decoder = getattr(self.b.model, "decoder", None)
        for cache in ("mel_overlap_dict", "hift_cache_dict"):  # flow_inference.py's, per id
            getattr(decoder, cache, {}).pop(self.stream_id, None)
        log.info("trial %s: %d blocks, model %s, %d audio underruns", self.trial.id or "-",
                 self.state.completed_blocks,
                 "stopped" if self.state.stop_requested else "running", self.audio.underruns)


class BayLingBridge(BridgeModel):
    """A loaded ``BayLingDuplex`` served one trial at a time (kit contract)."""

    name = NAME
    mode = "stepped"

    def __init__(self, torch: Any, model: Any, defaults: dict[str, Any],
                 transcript: bool = True, decoder_inference_mode: str = "auto"):
        self.torch, self.model = torch, model
        on_cpu = str(getattr(model, "device", "cpu")).startswith("cpu")
        if decoder_inference_mode == "off" and on_cpu:
            raise SystemExit(f"{NAME} bridge: BayLing's decoder fails on the CPU outside "
                             "inference mode (bayling_duplex_runtime/flow_inference.py:14, "
                             "fade_in_out writes in place into an inference tensor): use "
                             "--decoder-inference-mode auto or on")
        self.decoder_inference_mode = decoder_inference_mode == "on" or (
            decoder_inference_mode == "auto" and on_cpu)
        self.transcript = transcript
        self.defaults = defaults
        self.sample_rate = int(model.output_sample_rate)
        spt = self.sample_rate / TOKEN_RATE
        if spt != int(spt):
            raise SystemExit(f"{NAME} bridge: {self.sample_rate} Hz is not a whole number of "
                             f"samples per speech token")
        self.frame = int(spt)  # 1764: one speech token at 22,050 Hz
        self.x, self.y = int(model.x_ratio), int(model.y_ratio)
        self.window_tokens = int(WINDOW_S * TOKEN_RATE)

    def decoder_mode(self) -> Any:
        """The context the decoder runs in: ``torch.inference_mode`` with the CPU workaround
        (module doc), else ``no_grad``, as ``stream_tokens_to_audio`` itself sets."""
        return (self.torch.inference_mode() if self.decoder_inference_mode
                else self.torch.no_grad())

    def tokenize(self, samples: np.ndarray) -> list[int]:
        wave = self.torch.from_numpy(np.array(samples, dtype=np.float32))[None]
        ids, _ = self.model.tokenize_audio((wave, self.sample_rate))
        return list(ids)

    def open(self, options: dict[str, str], trial: Trial) -> BayLingSession:
        o = trial_options(options, self.defaults, trial, model=NAME, torch=self.torch,
                          check=check_options)
        return BayLingSession(self, o, trial)

    def warmup(self) -> None:
        """One block of silence before the first client (the kit calls it when it has the
        warm-up hook): the LM, the speech tokenizer and the decoder each run once."""
        session = self.open({}, Trial(id="warmup"))
        try:
            for _ in range(self.x):
                session.step(np.zeros(self.frame, dtype=np.float32))
        finally:
            session.close()


def check_options(o: dict[str, Any]) -> None:
    if o["tokenize"] not in TOKENIZE_MODES:
        raise OptionError(f"option tokenize: one of {', '.join(TOKENIZE_MODES)}, got "
                          f"{o['tokenize']!r}")
    if o["max_epad_count"] < 1:
        raise OptionError(f"option max_epad_count must be >= 1, got {o['max_epad_count']}")


# --- loading ----------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-path", required=True, metavar="DIR",
                   help="the BayLing-Duplex checkpoint (BayLing-Models/BayLing-Duplex)")
    p.add_argument("--speech-tokenizer-path", required=True, metavar="DIR",
                   help="the GLM-4-Voice speech tokenizer (zai-org/glm-4-voice-tokenizer)")
    p.add_argument("--decoder-path", required=True, metavar="DIR",
                   help="the GLM-4-Voice decoder: config.yaml, flow.pt, hift.pt")
    p.add_argument("--interleave-ratio", default="10:5:10",
                   help="user:text:assistant tokens per block (default 10:5:10)")
    p.add_argument("--device", default=None, help="cuda, cuda:0 or cpu (default: cuda when "
                                                  "available)")
    p.add_argument("--torch-dtype", default="auto",
                   choices=("auto", "float16", "fp16", "bfloat16", "bf16", "float32", "fp32"))
    p.add_argument("--no-transcript", action="store_true",
                   help="do not send the text stream (default: sent; the paper scored "
                        "BayLing-Duplex by its native streaming transcript)")
    p.add_argument("--decoder-inference-mode", choices=("auto", "on", "off"), default="auto",
                   help="run the speech decoder under torch.inference_mode (default auto: on "
                        "the CPU, where flow_inference.py's fade_in_out fails without it)")
    p.add_argument("--bayling-repo", metavar="DIR",
                   help="a BayLing-Duplex checkout, when bayling_duplex is not installed")
    add_option_flag(p, tuple(DEFAULTS))


def build(args: argparse.Namespace) -> BayLingBridge:
    model_dir = local_dir("--model-path", args.model_path, model=NAME, holds=("config.json",))
    tok_dir = local_dir("--speech-tokenizer-path", args.speech_tokenizer_path, model=NAME,
                        holds=("config.json", "preprocessor_config.json"))
    dec_dir = local_dir("--decoder-path", args.decoder_path, model=NAME,
                        holds=("config.yaml", "flow.pt", "hift.pt"))
    defaults = server_defaults(args.option, DEFAULTS, model=NAME, check=check_options)
    torch = import_model("torch", model=NAME, install=INSTALL)
    duplex = import_model("bayling_duplex.duplex", model=NAME, install=INSTALL,
                          path=args.bayling_repo)
    model = duplex.BayLingDuplex(model_path=str(model_dir), speech_tokenizer_path=str(tok_dir),
                                 decoder_path=str(dec_dir),
                                 interleave_ratio=args.interleave_ratio, device=args.device,
                                 torch_dtype=args.torch_dtype)
    return BayLingBridge(torch, model, defaults, transcript=not args.no_transcript,
                         decoder_inference_mode=args.decoder_inference_mode)


if __name__ == "__main__":
    raise SystemExit(serve_main(build, prog="python -m pytest_duplexact.bridges.bayling_duplex",
                                description=__doc__.split("\n\n")[0],
                                add_arguments=add_arguments))
