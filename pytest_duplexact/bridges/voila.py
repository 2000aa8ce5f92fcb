"""Voila-Autonomous (maitrix-org/Voila-autonomous-preview) behind the bridge protocol, stepped:
one audio-token frame of Voila's tokenizer per step. **Much of this is our reading of code
that has no streaming entry point; nothing here was run against the real weights.**

Run in Voila's own environment (a checkout of maitrix-org/Voila with its ``requirements.txt``,
``transformers==4.51.3`` in place of the unpinned one, plus ``pip install --no-deps`` a wheel
of pytest-duplexact and ``websockets``, docs/bridge-protocol.md §8)::

    python -m pytest_duplexact.bridges.voila --port 8765 --voila-repo VOILA \\
        --checkpoint DIR --audio-tokenizer TOKDIR

Versions: Voila's requirements pin nothing. ``model.py`` reads ``DynamicCache.seen_tokens``
(``_prepare_inputs_for_generation``, line 1157), which transformers 4.57 and 5.x no longer
have: the bridge refuses such a transformers at start, in one line; 4.51.3 works. flash-attn
is optional here (``--attention``, below). torchaudio 2.9 and later read audio files only
through torchcodec and FFmpeg; the bridge reads ``--ref-audio`` with soundfile (in Voila's
requirements), so it needs neither (infer.py's ``torchaudio.load`` does).

``DIR`` and ``TOKDIR`` are local copies of maitrix-org/Voila-autonomous-preview and
maitrix-org/Voila-Tokenizer. Voila's code is not a package: ``--voila-repo`` is the checkout
holding ``model.py``, ``voila_tokenizer.py``, ``tokenize_func.py`` and ``spkr.py``.

What is Voila's own (``infer.py``'s ``load_model`` and ``eval_model`` for ``--task-type
chat_aiao_auto``, ``model.py``'s ``VoilaAutonomousModel.run_generate``, ``tokenize_func.py``):

* the model loaded as ``load_model`` does (bfloat16, cache on; attention: below), the text
  tokenizer with ``AutoTokenizer``, the audio tokenizer ``VoilaTokenizer``, the voice from a
  reference recording through ``SpeakerEmbedding`` (default: infer.py's
  ``examples/test1.mp3``; pyannote loads its speaker model, by default from its hub cache);
* attention: ``load_model`` hard-codes flash attention 2, which needs the flash-attn package
  and a GPU. ``--attention auto`` (the default) keeps it when flash-attn is importable and the
  device is CUDA, and otherwise uses PyTorch's ``sdpa`` (transformers' Llama supports both;
  the same weights, a different kernel); ``--attention flash_attention_2|sdpa|eager`` forces
  one, and ``flash_attention_2`` without flash-attn is refused at start in one line;
* the prompt from ``voila_input_format`` (system, instruction, ``<|HUMAN|>``; both channels);
* ``run_generate``'s arguments and eval_model's sampling values (temperature 0.2, top_k 50,
  audio_temperature 0.8, audio_top_k 50), and the output rows read as eval_model reads them:
  an audio frame is each codebook's id minus the audio base, modulo ``codebook_size``.

What is ours (a reading of ``run_generate``; each a guess until run on the weights):

* **Stepping.** ``run_generate`` is one blocking call that pulls one user frame from
  ``input_generator`` at every audio row. Here it runs in a thread of its own; its input
  generator blocks until the bridge's next step brings a frame, and a streamer collects the
  rows. An audio row is generated *before* the user frame of the same row is pulled, so the
  assistant frame of row k answers user frames < k: the audio of step k is row k's, and the
  text rows generated between audio rows k-1 and k are sent with step k.
* **Which row is the audio row: by position.** ``run_generate`` pulls a frame only when its
  text head says ``<au_token>``, and then puts that row before anything else
  (``model.py`` 1356-1372): the first row after each pulled frame is the frame's audio row,
  whatever its ids. eval_model tells audio from text by the id range instead, but the text
  head may also sample a raw audio id (no frame is pulled then): such a row is neither this
  frame's audio nor a word, and is dropped (counted in the trial's log line).
* **The frame.** One step is one code frame of the audio tokenizer: ``prod(upsampling_ratios)``
  of its Encodec config at its ``sampling_rate`` (640 samples at 16 kHz, 40 ms, is
  ``tokenize_func.py``'s ``SEG_LEN``).
* **Encoding and decoding per frame.** Voila's code tokenizes a whole recording at once and
  decodes a whole reply at once. Here each step encodes the last ``context`` + 1 frames of
  input and keeps the last code frame, and decodes the last ``context`` + 1 code frames of
  output and keeps the last frame of audio (Encodec's convolutions see that much past).
* **Warm-up.** ``warmup()`` steps a trial of four silent frames before the first client (when
  the kit runs a model's warm-up): the first forward passes are slow (40 s on the CPU).
* **Length.** ``max_new_tokens`` (rows: text and audio) caps a session; eval_model's 512 is
  about 20 s, so it defaults to 8192 here. When the model's run ends before the trial does, the
  trial ends with an error that says so.
* Text, sent only with ``--transcript`` (the paper transcribed Voila's speech with whisper-1,
  its Appendix D.1; without it the plugin transcribes the audio): a segment runs from the
  assistant token (``<|VOILA|>``, which ``run_generate`` inserts
  when its voila head says to start speaking) to end-of-sequence, decoded whole with
  ``skip_special_tokens``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .kit import BridgeModel, OptionError, Trial
from .kit import main as serve_main
from .modelkit import (
    TextDeltas,
    add_option_flag,
    import_model,
    local_dir,
    server_defaults,
    trial_options,
)

NAME = "voila"
TASK = "chat_aiao_auto"  # infer.py --task-type for the autonomous model
SPEAKER_MODEL = "pyannote/wespeaker-voxceleb-resnet34-LM"  # spkr.py's default
INSTALL = ("clone maitrix-org/Voila, `pip install -r requirements.txt transformers==4.51.3` "
           "there and pass --voila-repo, then `pip install --no-deps` a wheel of "
           "pytest-duplexact and websockets (docs/bridge-protocol.md §8)")
ATTENTION = ("auto", "flash_attention_2", "sdpa", "eager")
WARMUP_FRAMES = 4
DEFAULTS: dict[str, Any] = {"temperature": 0.2, "top_k": 50, "audio_temperature": 0.8,
                            "audio_top_k": 50, "max_new_tokens": 8192, "instruction": "",
                            "context": 25, "seed": 0}
log = logging.getLogger("pytest_duplexact.bridges.voila")

_NEED, _END, _STOP = "need input", "ended", object()


class GenerationEnded(RuntimeError):
    """``run_generate`` returned (its ``max_new_tokens``) while the trial goes on."""


class Generation:
    """``run(input_generator, streamer)`` (``run_generate`` with everything else bound) in a
    thread of its own, fed one user frame whenever it asks for one.

    ``begin()`` returns the rows it generates before its first request; ``feed(frame)`` gives
    it a frame and returns the rows it generates until its next request. Every wait has the
    deadline ``timeout`` (s)."""

    def __init__(self, run: Callable[[Iterator[Any], Any], Any], timeout: float):
        self.timeout = timeout
        self._inbox: queue.Queue = queue.Queue()
        self._events: queue.Queue = queue.Queue()
        self.rows = 0
        self._thread = threading.Thread(target=self._main, args=(run,), daemon=True,
                                        name="voila-run-generate")

    def begin(self) -> list[list[int]]:
        self._thread.start()
        return self._collect()

    def feed(self, frame: Any) -> list[list[int]]:
        self._inbox.put(frame)
        return self._collect()

    def stop(self) -> None:
        self._inbox.put(_STOP)  # the input generator returns: run_generate breaks its loop
        if self._thread.ident is not None:
            self._thread.join(self.timeout)
            if self._thread.is_alive():
                log.warning("run_generate still running %.0f s after the trial ended",
                            self.timeout)

    # --- the thread's side ---------------------------------------------------------------
    def _inputs(self) -> Iterator[Any]:
        while True:
            self._events.put((_NEED, None))
            frame = self._inbox.get()
            if frame is _STOP:
                return
            yield frame

    # run_generate's ``streamer``: ``put`` gets each row's next_tokens ([1, 1, nc])
    def put(self, value: Any) -> None:
        self._events.put(("row", [int(v) for v in value.reshape(-1).tolist()]))

    def end(self) -> None:
        pass

    def _main(self, run: Callable) -> None:
        try:
            run(self._inputs(), self)
            self._events.put((_END, None))
        except BaseException as e:  # handed to the stepping thread
            self._events.put(("error", e))

    def _collect(self) -> list[list[int]]:
        rows: list[list[int]] = []
        while True:
            try:
                kind, value = self._events.get(timeout=self.timeout)
            except queue.Empty:
                raise TimeoutError(f"run_generate asked for no input within {self.timeout:g} s"
                                   ) from None
            if kind == "row":
                rows.append(value)
                self.rows += 1
            elif kind == _NEED:
                return rows
            elif kind == _END:
                raise GenerationEnded(f"run_generate ended after {self.rows} rows (raise the "
                                      "max_new_tokens option for longer sessions)")
            else:
                raise RuntimeError(f"run_generate failed: {type(value).__name__}: {value}"
                                   ) from value


class SlidingCodec:
    """Per-frame encode and decode through whole-signal ``encode(samples) -> codes [nc, T]``
    and ``decode(codes [nc, T]) -> samples``, each over the last ``context`` + 1 frames."""

    def __init__(self, encode: Callable[[np.ndarray], np.ndarray],
                 decode: Callable[[np.ndarray], np.ndarray], frame: int, context: int):
        self._encode, self._decode = encode, decode
        self.frame, self.context = frame, context
        self._heard = np.zeros(0, dtype=np.float32)
        self._codes: list[list[int]] = []

    def encode(self, samples: np.ndarray) -> list[int]:
        keep = (self.context + 1) * self.frame
        self._heard = np.concatenate([self._heard, np.asarray(samples, np.float32)])[-keep:]
        codes = np.asarray(self._encode(self._heard))
        if codes.ndim != 2 or codes.shape[1] < 1:
            raise RuntimeError(f"the audio tokenizer gave codes of shape {codes.shape} for "
                               f"{self._heard.size} samples")
        return [int(c) for c in codes[:, -1]]

    def decode(self, codes: list[int]) -> np.ndarray:
        self._codes = (self._codes + [codes])[-(self.context + 1):]
        audio = np.asarray(self._decode(np.asarray(self._codes).T), dtype=np.float32)
        audio = audio.reshape(-1)
        if audio.size < self.frame:
            raise RuntimeError(f"the audio tokenizer decoded {len(self._codes)} frames to "
                               f"{audio.size} samples; expected at least {self.frame}")
        return audio[-self.frame:]


class VoilaSession:
    def __init__(self, bridge: "VoilaBridge", o: dict[str, Any], trial: Trial):
        b = self.b = bridge
        self.codec = SlidingCodec(b.encode, b.decode, b.frame, o["context"])
        self.text = TextDeltas(b.decode_text)
        self.trial = trial
        self.stray = 0  # text rows holding a raw audio id (dropped)
        self.gen = Generation(b.runner(o), b.step_timeout)
        try:
            first = self.gen.begin()  # text rows before the first audio row
            self.stray += sum(1 for r in first if b.is_audio(r[0]))
            self._held = self._texts(first)
        except BaseException:
            self.gen.stop()  # the kit closes no session it never got
            raise

    def step(self, frame: np.ndarray) -> tuple[np.ndarray, list[str]]:
        b = self.b
        rows = self.gen.feed(b.user_ids(self.codec.encode(frame)))
        if not rows:
            raise RuntimeError("run_generate pulled a frame but put no row for it")
        # the first row after a pulled frame is that frame's audio row (module doc)
        audio, rest = rows[0], rows[1:]
        self.stray += sum(1 for r in rest if b.is_audio(r[0]))
        texts, self._held = self._held, self._texts(rest)
        return self.codec.decode(b.audio_codes(audio)), texts

    def _texts(self, rows: list[list[int]]) -> list[str]:
        if not self.b.transcript:
            return []
        out = []
        for row in rows:
            tok = row[0]
            if self.b.is_audio(tok):  # a raw audio id from the text head: not a word
                continue
            if tok in (self.b.assistant_id, self.b.eos_id):
                out.append(self.text.end())
            elif tok != self.b.pad_id:
                out.append(self.text.feed(tok))
        return [t for t in out if t]

    def close(self) -> None:
        self.gen.stop()
        log.info("trial %s: %d rows, %d text rows with a raw audio id dropped",
                 self.trial.id or "-", self.gen.rows, self.stray)


class VoilaBridge(BridgeModel):
    """A loaded Voila-Autonomous served one trial at a time (kit contract). ``model``:
    ``VoilaAutonomousModel``; ``tokenizer``: its text tokenizer; ``codec``: ``VoilaTokenizer``;
    ``prompt(instruction)``: the prompt ids as eval_model builds them."""

    name = NAME
    mode = "stepped"

    def __init__(self, torch: Any, model: Any, tokenizer: Any, codec: Any, *, device: Any,
                 prompt: Callable[[str], Any], ref_embs: Any, ref_embs_mask: Any,
                 ids: dict[str, int], defaults: dict[str, Any], step_timeout: float = 120.0,
                 transcript: bool = False):
        self.transcript = transcript
        self.torch, self.model, self.tokenizer, self.codec = torch, model, tokenizer, codec
        self.device, self.prompt = device, prompt
        self.ref_embs, self.ref_embs_mask = ref_embs, ref_embs_mask
        self.defaults, self.step_timeout = defaults, step_timeout
        self.nc = int(model.config.num_codebooks)
        self.codebook = int(model.config.codebook_size)
        self.audio_min, self.audio_id = ids["audio_min"], ids["audio"]
        self.assistant_id = ids["assistant"]
        self.eos_id, self.pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
        self.audio_max = ids["audio_max"]
        self.sample_rate = int(codec.sampling_rate)
        self.frame = int(np.prod(codec.model.config.upsampling_ratios))

    # --- the model's tokens <-> audio ----------------------------------------------------
    def is_audio(self, token: int) -> bool:
        return self.audio_min <= token <= self.audio_max

    def user_ids(self, codes: list[int]) -> Any:
        """A user frame as run_generate's input generator yields it (tokenize_func's
        ``_wrapper_audio_tokens_autonomous``)."""
        ids = [c + n * self.codebook + self.audio_min for n, c in enumerate(codes)]
        return self.torch.tensor(ids, dtype=self.torch.long, device=self.device)

    def audio_codes(self, row: list[int]) -> list[int]:
        return [(t - self.audio_min) % self.codebook for t in row]

    def encode(self, samples: np.ndarray) -> np.ndarray:
        return self.codec.encode(samples, sr=self.sample_rate).cpu().numpy()

    def decode(self, codes: np.ndarray) -> np.ndarray:
        t = self.torch.as_tensor(codes, dtype=self.torch.long, device=self.device)
        return self.codec.decode(t).float().cpu().numpy()

    def decode_text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # --- trials --------------------------------------------------------------------------
    def runner(self, o: dict[str, Any]) -> Callable[[Iterator[Any], Any], Any]:
        input_ids = self.prompt(o["instruction"])
        params = {"input_ids": input_ids, "ref_embs": self.ref_embs,
                  "ref_embs_mask": self.ref_embs_mask, "max_new_tokens": o["max_new_tokens"],
                  "pad_token_id": self.pad_id, "eos_token_id": self.eos_id,
                  "llm_audio_token_id": self.audio_id, "min_audio_token_id": self.audio_min,
                  "llm_assistant_token_id": self.assistant_id,
                  "temperature": o["temperature"], "top_k": o["top_k"],
                  "audio_temperature": o["audio_temperature"], "audio_top_k": o["audio_top_k"]}

        def run(inputs: Iterator[Any], streamer: Any) -> Any:
            return self.model.run_generate(input_generator=inputs, streamer=streamer, **params)
        return run

    def open(self, options: dict[str, str], trial: Trial) -> VoilaSession:
        o = trial_options(options, self.defaults, trial, model=NAME, torch=self.torch,
                          check=check_options)
        return VoilaSession(self, o, trial)

    def warmup(self) -> None:
        """A short trial of silence before the first client (the kit calls it when it has the
        warm-up hook): on the CPU the first bf16 forward passes took 40 s, over the client's
        30 s step_timeout."""
        session = self.open({}, Trial(id="warmup"))
        try:
            for _ in range(WARMUP_FRAMES):
                session.step(np.zeros(self.frame, dtype=np.float32))
        finally:
            session.close()


def check_options(o: dict[str, Any]) -> None:
    for key in ("max_new_tokens", "top_k", "audio_top_k"):
        if o[key] < 1:
            raise OptionError(f"option {key} must be >= 1, got {o[key]}")
    if o["context"] < 0:
        raise OptionError(f"option context must be >= 0 frames, got {o['context']}")


# --- loading ----------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--voila-repo", required=True, metavar="DIR",
                   help="a maitrix-org/Voila checkout (model.py, voila_tokenizer.py, ...)")
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="local copy of maitrix-org/Voila-autonomous-preview")
    p.add_argument("--audio-tokenizer", required=True, metavar="DIR",
                   help="local copy of maitrix-org/Voila-Tokenizer")
    p.add_argument("--ref-audio", metavar="FILE",
                   help="the voice to speak with (default: the checkout's examples/test1.mp3, "
                        "infer.py's default)")
    p.add_argument("--speaker-model", default=SPEAKER_MODEL,
                   help=f"pyannote speaker model for --ref-audio (default {SPEAKER_MODEL}, "
                        "spkr.py's)")
    p.add_argument("--device", default="cuda", help="torch device (default cuda, as infer.py)")
    p.add_argument("--attention", choices=ATTENTION, default="auto",
                   help="the LM's attention kernel (default auto: flash_attention_2, as "
                        "infer.py, when flash-attn is installed and the device is CUDA, "
                        "else sdpa)")
    p.add_argument("--transcript", action="store_true",
                   help="send the text rows as the model's words (default off: the paper "
                        "transcribed Voila's speech with whisper-1)")
    p.add_argument("--step-timeout", type=float, default=120.0,
                   help="seconds run_generate may take to ask for the next frame")
    add_option_flag(p, tuple(DEFAULTS))


def build(args: argparse.Namespace) -> VoilaBridge:
    repo = local_dir("--voila-repo", args.voila_repo, model=NAME,
                     holds=("model.py", "voila_tokenizer.py", "tokenize_func.py", "spkr.py"))
    ckpt = local_dir("--checkpoint", args.checkpoint, model=NAME, holds=("config.json",))
    tok_dir = local_dir("--audio-tokenizer", args.audio_tokenizer, model=NAME,
                        holds=("config.json",))
    ref_audio = Path(args.ref_audio or repo / "examples" / "test1.mp3").expanduser()
    if not ref_audio.is_file():
        raise SystemExit(f"{NAME} bridge: --ref-audio {str(ref_audio)!r} is not a file")
    defaults = server_defaults(args.option, DEFAULTS, model=NAME, check=check_options)
    torch = import_model("torch", model=NAME, install=INSTALL)
    import_model("torchaudio", model=NAME, install=INSTALL)  # voila_tokenizer's, spkr's
    transformers = import_model("transformers", model=NAME, install=INSTALL)
    check_transformers(transformers.__version__,
                       import_model("transformers.cache_utils", model=NAME, install=INSTALL))
    soundfile = import_model("soundfile", model=NAME, install=INSTALL)
    attention = attention_for(args.attention, args.device)
    voila_model = import_model("model", model=NAME, install=INSTALL, path=str(repo))
    voila_tokenizer = import_model("voila_tokenizer", model=NAME, install=INSTALL)
    spkr = import_model("spkr", model=NAME, install=INSTALL)
    fmt = import_model("tokenize_func", model=NAME, install=INSTALL)

    device = torch.device(args.device)
    model = voila_model.VoilaAutonomousModel.from_pretrained(
        str(ckpt), torch_dtype=torch.bfloat16, attn_implementation=attention, use_cache=True)
    model = model.to(device).eval()
    log.info("attention: %s", attention)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(ckpt))
    codec = voila_tokenizer.VoilaTokenizer(model_path=str(tok_dir), device=args.device)
    try:  # [channels, samples] float32, as torchaudio.load gives it to infer.py
        data, sr = soundfile.read(str(ref_audio), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile's own errors name no common base
        raise SystemExit(f"{NAME} bridge: cannot read --ref-audio {str(ref_audio)!r}: {e}"
                         ) from None
    wav = torch.from_numpy(np.ascontiguousarray(data.T))
    ref_embs = spkr.SpeakerEmbedding(model_path=args.speaker_model, device=args.device)(wav, sr)
    return assemble(torch, fmt, model, tokenizer, codec, device=device, ref_embs=ref_embs,
                    defaults=defaults, step_timeout=args.step_timeout,
                    transcript=args.transcript)


def check_transformers(version: str, cache_utils: Any) -> None:
    """Voila's ``model.py`` reads ``DynamicCache.seen_tokens`` at every step after the first:
    a transformers without it fails in the first trial, so the bridge refuses it at start."""
    if not hasattr(cache_utils.DynamicCache, "seen_tokens"):
        raise SystemExit(f"{NAME} bridge: transformers {version} has no "
                         "DynamicCache.seen_tokens, which Voila's model.py reads (line 1157, "
                         "_prepare_inputs_for_generation): pip install transformers==4.51.3")


def attention_for(choice: str, device: str) -> str:
    """The attention kernel to load the LM with (``--attention``; module doc)."""
    has_flash = importlib.util.find_spec("flash_attn") is not None
    if choice == "auto":
        return "flash_attention_2" if has_flash and device.startswith("cuda") else "sdpa"
    if choice == "flash_attention_2" and not has_flash:
        raise SystemExit(f"{NAME} bridge: --attention flash_attention_2 needs the flash-attn "
                         "package (pip install flash-attn, on a CUDA machine); --attention "
                         "sdpa runs without it")
    return choice


def assemble(torch: Any, fmt: Any, model: Any, tokenizer: Any, codec: Any, *, device: Any,
             ref_embs: Any, defaults: dict[str, Any], step_timeout: float,
             transcript: bool = False) -> VoilaBridge:
    """The bridge around loaded parts; ``fmt`` is Voila's ``tokenize_func`` (its token names
    and ``voila_input_format``)."""
    n_audio = model.config.num_codebooks * model.config.codebook_size
    ids = {"audio_min": tokenizer.convert_tokens_to_ids(fmt.AUDIO_TOKEN_FORMAT.format(0)),
           "audio_max": tokenizer.convert_tokens_to_ids(fmt.AUDIO_TOKEN_FORMAT.format(
               n_audio - 1)),
           "audio": tokenizer.convert_tokens_to_ids(fmt.DEFAULT_AUDIO_TOKEN),
           "assistant": tokenizer.convert_tokens_to_ids(fmt.DEFAULT_ASSISTANT_TOKEN)}
    data_cfg = {"input_type": "autonomous", "task_type": TASK,
                "num_codebooks": model.config.num_codebooks,
                "codebook_size": model.config.codebook_size}

    def prompt(instruction: str) -> Any:
        # eval_model's prompt; the one-frame silent recording only satisfies the formatter,
        # its streaming tokens are dropped (the bridge streams the real input)
        item = {"instruction": instruction,
                "conversations": [{"from": "user", "audio": {"array": np.zeros(640),
                                                             "sr": fmt.AUDIO_SR}},
                                  {"from": "assistant"}]}
        input_ids, _, _, _ = fmt.voila_input_format(item, tokenizer, codec, data_cfg)
        channels = [torch.as_tensor([x]).transpose(1, 2).to(device) for x in input_ids]
        return torch.cat(channels, dim=2)

    return VoilaBridge(torch, model, tokenizer, codec, device=device, prompt=prompt,
                       ref_embs=ref_embs, ref_embs_mask=torch.tensor([1], device=device),
                       ids=ids, defaults=defaults, step_timeout=step_timeout,
                       transcript=transcript)


if __name__ == "__main__":
    raise SystemExit(serve_main(build, prog="python -m pytest_duplexact.bridges.voila",
                                description=__doc__.split("\n\n")[0],
                                add_arguments=add_arguments))
