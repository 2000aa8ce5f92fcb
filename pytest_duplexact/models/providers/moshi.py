"""``--duplexact-model=moshi``: Kyutai's Moshi (the ``moshi`` package, 0.2.13) as a stepped model.

The frame loop is the official server's (moshi/server.py): Mimi and ``LMGen`` stream with batch
size 1; each 80 ms input frame (1920 samples at 24 kHz) is encoded to one code frame and given
to ``LMGen.step``; the returned tokens are decoded back to 1920 samples, and the text token of
the same step is a SentencePiece piece of the model's inner monologue. Like the server, the
first input frame is encoded and then Mimi's streaming state is reset, so the next frame gets
the encoder's left padding again (the LM never reads frame 0's codes: it is "in the past").

Clock. ``LMGen.step`` returns nothing for the first ``max_delay`` frames (the acoustic delay);
those output frames are silence. The tokens returned after input frame k are played during
frame k + 1, not k: the model needs the whole of frame k before it can answer, so a real-time
deployment cannot start that audio earlier. The first audible frame is therefore frame 2
(160 ms), Moshi's theoretical latency (80 ms frame + 80 ms acoustic delay).

Native transcript. A text token travels with the audio decoded from the same step (as the
server sends them), so a word's time is the start of the output frame in which its first piece
is played; its end is the end of the frame of its last piece (80 ms resolution). A piece that
starts with "▁" begins a word; the padding tokens end one. A word is reported in the frame in
which it is known to be complete (the next word or a padding token), with its start in an
earlier frame: the transcript is never ahead of what Moshi has emitted.

Checkpoints are local files only: this module never calls the package's hub helpers
(``hf_get``, ``CheckpointInfo.from_hf_repo``); ``requirements.py`` refuses ``hf://`` and repo
ids before anything is imported. Sampling is seeded at every ``start`` from the run seed and the
``seed`` option, and uses an RNG state of its own (swapped in around each step), so a trial's
output depends only on its input and the seeds, whatever runs before or between steps.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..catalogue.builtins import BUILTINS
from ..catalogue.requirements import NotReady, local_file_problem
from ..contract import DuplexModel, ModelError, SessionInfo, StepOutput
from ..model_options import ModelConfigError
from ..util.words import TextStream

SAMPLE_RATE = 24_000
FRAME_SIZE = 1_920  # 80 ms: one Mimi frame at 12.5 Hz
FRAME_S = FRAME_SIZE / SAMPLE_RATE
WARMUP_FRAMES = 4  # as moshi/server.py's warmup
DTYPES = ("float32", "bfloat16", "float16")
# config.json keys that describe the checkpoint, not LMModel's arguments (as in
# moshi.models.loaders.CheckpointInfo.from_hf_repo)
_CONFIG_ONLY_KEYS = ("moshi_name", "mimi_name", "mimi_config_name", "tokenizer_name",
                     "lora_name", "model_type", "lm_gen_config", "tts_config", "stt_config",
                     "model_id")


# --- the model ---------------------------------------------------------------------------------

def trial_seed(run_seed: int, option_seed: int) -> int:
    """One torch seed per (run seed, option seed); the same for every trial of a run, so a
    trial's result never depends on which trials ran before it (xdist, resume, sharding)."""
    digest = hashlib.sha256(f"moshi/{int(run_seed)}/{int(option_seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class MoshiModel(DuplexModel):
    """A loaded Mimi + Moshi LM + tokenizer as a ``SteppedModel``.

    Built by ``factory`` from checkpoint files; tests and custom loaders may pass their own
    ``mimi`` (``moshi.models.MimiModel``), ``lm`` (``LMModel``) and ``text_tokenizer``
    (``sentencepiece.SentencePieceProcessor``). ``sampling`` holds ``LMGen``'s keyword
    arguments (temp, temp_text, top_k, top_k_text)."""

    name = "moshi"
    sample_rate = SAMPLE_RATE
    frame_size = FRAME_SIZE

    def __init__(self, mimi, lm, text_tokenizer, *, seed: int = 0,
                 sampling: dict[str, Any] | None = None):
        import torch
        from moshi.models import LMGen

        if int(mimi.sample_rate) != SAMPLE_RATE or round(mimi.sample_rate / mimi.frame_rate) \
                != FRAME_SIZE:
            raise ModelConfigError(f"moshi: Mimi runs at {mimi.sample_rate} Hz, "
                                   f"{mimi.frame_rate} frames/s; expected {SAMPLE_RATE} Hz, "
                                   f"12.5 frames/s")
        n_text = lm.text_linear.out_features
        if text_tokenizer.vocab_size() < n_text:
            raise ModelConfigError(f"moshi: the tokenizer has {text_tokenizer.vocab_size()} "
                                   f"pieces but the LM emits {n_text} text ids: wrong tokenizer "
                                   "for this checkpoint")
        self._torch = torch
        self.mimi, self.lm, self.tokenizer = mimi, lm, text_tokenizer
        self.device = next(lm.parameters()).device
        self.seed = int(seed)
        self.sampling = dict(sampling or {})
        self.lm_gen = LMGen(lm, **self.sampling)
        self._silent_ids = {lm.text_padding_token_id, lm.end_of_text_padding_id}
        self._stack: ExitStack | None = None

    # --- trial lifecycle ---------------------------------------------------------------------
    def start(self, info: SessionInfo) -> None:
        self.begin(info.seed)

    def begin(self, run_seed: int) -> None:
        """A fresh trial seeded from ``run_seed`` (``start`` without the SessionInfo: the
        moshi bridge, bridges/moshi_bridge.py, has only the run's seed)."""
        torch = self._torch
        self.finish()  # a trial that failed mid-way may not have been finished
        self._stack = ExitStack()
        self._stack.enter_context(self.mimi.streaming(1))
        self._stack.enter_context(self.lm_gen.streaming(1))
        self._rng = _seeded_states(torch, self.device, trial_seed(run_seed, self.seed))
        self._k = 0
        self._pending: tuple[np.ndarray, int | None] | None = None  # last step's answer
        self._text = TextStream(FRAME_S)
        self._silence = np.zeros(FRAME_SIZE, dtype=np.float32)

    def step(self, frame: np.ndarray) -> StepOutput:
        k = self._k
        audio, piece = self.step_piece(frame)
        return StepOutput(audio, self._text.feed(k, piece))

    def step_piece(self, frame: np.ndarray) -> tuple[np.ndarray, str | None]:
        """One frame: the output audio heard during it and the text piece played with it
        (``None``: padding); ``step`` turns the pieces into words, a bridge sends them."""
        torch = self._torch
        with torch.no_grad(), _OwnRng(torch, self.device, self._rng):
            x = torch.tensor(np.asarray(frame, dtype=np.float32), device=self.device)  # a copy:
            codes = self.mimi.encode(x[None, None])  # the harness's frame may be read-only
            if self._k == 0:  # as the server: re-pad the encoder after the first frame
                self.mimi.reset_streaming()
            tokens = self.lm_gen.step(codes[:, :, :1])
            if tokens is None:  # the model's delay: nothing generated yet
                answer = (self._silence, None)
            else:
                pcm = self.mimi.decode(tokens[:, 1:])
                answer = (pcm[0, 0].float().cpu().numpy(), int(tokens[0, 0, 0]))
        # the answer to frame k is heard during frame k + 1 (module doc)
        audio, text_id = self._pending or (self._silence, None)
        self._pending = answer
        self._k += 1
        return audio, self._piece(text_id)

    def _piece(self, text_id: int | None) -> str | None:
        tok = self.tokenizer
        if text_id is None or text_id in self._silent_ids or not \
                0 <= text_id < tok.vocab_size() or tok.is_control(text_id) or \
                tok.is_unknown(text_id):
            return None
        return tok.id_to_piece(text_id)

    def finish(self) -> None:
        if self._stack is not None:
            self._stack.close()  # leaves streaming: the next start gets fresh state
            self._stack = None

    def warm_up(self, frames: int = WARMUP_FRAMES) -> None:
        """``frames`` frames of silence through a throwaway trial, as Kyutai's server does
        before it listens (moshi/server.py ``warmup``): moshi compiles its kernels at their
        first call (``torch_compile_lazy``; CUDA graphs on a GPU), which would otherwise fall
        in the next trial's step 0 (54 s on a cold CPU cache for the tiny test model). Leaves
        no state: the next trial starts afresh (``warm_up_batch`` after ``open_batch``)."""
        self.begin(0)
        try:
            for _ in range(frames):
                self.step_piece(np.zeros(FRAME_SIZE, dtype=np.float32))
        finally:
            self.finish()

    # --- batched stepping (--duplexact-batch; module doc, "Batches") -------------------------
    slots_reset_alone = True  # moshi's reset_streaming(reset_mask) and set_exec_mask

    def open_batch(self, size: int) -> None:
        from moshi.models import LMGen

        self.finish()
        # out of sync: each slot's own offset decides its acoustic delay, not the shared one
        self._batch_gen = LMGen(self.lm, support_out_of_sync=True, **self.sampling)
        self._stack = ExitStack()
        self._stack.enter_context(self.mimi.streaming(size))
        self._stack.enter_context(self._batch_gen.streaming(size))
        self._size = size
        self._slot_state: dict[int, _SlotState] = {}
        self._batch_rng: dict | None = None  # seeded at the first start_slot (the run seed)
        self._silence = np.zeros(FRAME_SIZE, dtype=np.float32)

    def _mask(self, slots) -> Any:
        mask = self._torch.zeros(self._size, dtype=self._torch.bool, device=self.device)
        mask[list(slots)] = True
        return mask

    def start_slot(self, slot: int, info: SessionInfo) -> None:
        if self._batch_rng is None:
            self._batch_rng = _seeded_states(self._torch, self.device,
                                             trial_seed(info.seed, self.seed))
        mask = self._mask([slot])
        self.mimi.reset_streaming(mask)
        self._batch_gen.reset_streaming(mask)
        self._slot_state[slot] = _SlotState()

    def step_batch(self, frames) -> dict[int, StepOutput]:
        ks = {s: self._slot_state[s].k for s in frames}
        return {s: StepOutput(audio, self._slot_state[s].text.feed(ks[s], piece))
                for s, (audio, piece) in self.step_batch_pieces(frames).items()}

    def step_batch_pieces(self, frames) -> dict[int, tuple[np.ndarray, str | None]]:
        """``step_piece`` for every slot in ``frames`` in one batched call (a bridge sends
        the pieces; ``step_batch`` turns them into words)."""
        torch = self._torch
        slots = sorted(frames)
        states = self._slot_state
        with torch.no_grad(), _OwnRng(torch, self.device, self._batch_rng) as own:
            x = torch.zeros(self._size, 1, FRAME_SIZE, device=self.device)
            for s in slots:
                x[s, 0] = torch.from_numpy(np.asarray(frames[s], dtype=np.float32))
            stepping = self._mask(slots)
            self.mimi.set_exec_mask(stepping)
            codes = self.mimi.encode(x)
            first = [s for s in slots if states[s].k == 0]
            if first:  # as the server: re-pad the encoder after a trial's first frame
                self.mimi.reset_streaming(self._mask(first))
            self._batch_gen.set_exec_mask(stepping)
            tokens = self._batch_gen.step(codes[:, :, :1])  # [B, 1 + dep_q, 1]
            audio_tokens = tokens[:, 1:]
            made = stepping & (audio_tokens >= 0).all(dim=2).all(dim=1)  # past its delay
            pcm = None
            if bool(made.any()):
                self.mimi.set_exec_mask(made)
                pcm = self.mimi.decode(torch.where(audio_tokens >= 0, audio_tokens, 0))
                pcm = pcm[:, 0].float().cpu().numpy()
            made_list = made.cpu().tolist()
            text_ids = tokens[:, 0, 0].cpu().tolist()
        self._batch_rng = own.states
        out = {}
        for s in slots:
            st = states[s]
            answer = (pcm[s].copy(), int(text_ids[s])) if made_list[s] else (self._silence, None)
            audio, text_id = st.pending or (self._silence, None)  # heard one frame later
            st.pending = answer
            st.k += 1
            out[s] = (audio, self._piece(text_id))
        return out

    def finish_slot(self, slot: int) -> None:
        self._slot_state.pop(slot, None)

    def warm_up_batch(self, frames: int = WARMUP_FRAMES) -> None:
        """``warm_up`` at the batch size of ``open_batch``: every slot steps ``frames``
        frames of silence; then the slots are free and the lockstep is seeded by the first
        real trial, as if none had run."""
        slots = range(self._size)
        for s in slots:
            self.start_slot(s, SessionInfo(instance=None, seed=0))
        silence = np.zeros(FRAME_SIZE, dtype=np.float32)
        for _ in range(frames):
            self.step_batch_pieces({s: silence for s in slots})
        for s in slots:
            self.finish_slot(s)
        self._batch_rng = None


class _SlotState:
    """One batched trial's frame count, held-back answer and text stream (``start``'s)."""

    __slots__ = ("k", "pending", "text")

    def __init__(self) -> None:
        self.k = 0
        self.pending: tuple[np.ndarray, int | None] | None = None
        self.text = TextStream(FRAME_S)


def _seeded_states(torch, device, seed: int) -> dict:
    """The global RNG states (CPU, and the CUDA device if any) after seeding with ``seed``,
    computed without disturbing the caller's."""
    with _OwnRng(torch, device, None) as own:
        torch.manual_seed(seed)
    return own.states


class _OwnRng:
    """Swap a private RNG state in for torch's global one (moshi's samplers take no
    generator) and put the caller's back afterwards, keeping ours in ``states``."""

    def __init__(self, torch, device, states: dict | None):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device
        self.states = states

    def __enter__(self):
        t = self.torch
        self._saved = (t.get_rng_state(), t.cuda.get_rng_state(self.device) if self.cuda else None)
        if self.states is not None:
            t.set_rng_state(self.states["cpu"])
            if self.cuda:
                t.cuda.set_rng_state(self.states["cuda"], self.device)
        return self

    def __exit__(self, *exc):
        t = self.torch
        self.states = {"cpu": t.get_rng_state(),
                       "cuda": t.cuda.get_rng_state(self.device) if self.cuda else None}
        t.set_rng_state(self._saved[0])
        if self.cuda:
            t.cuda.set_rng_state(self._saved[1], self.device)
        return False


# --- building from checkpoint files ------------------------------------------------------------

@dataclass(frozen=True)
class MoshiOptions:
    """``--duplexact-model-option`` values, converted and checked (docs/models.md, moshi)."""

    mimi_weights: str
    lm_weights: str
    tokenizer: str
    lm_config: str = ""
    mimi_config: str = ""
    device: str = "auto"  # auto: cuda when available, else cpu
    dtype: str = "auto"  # the LM's; auto: bfloat16 on cuda, float32 on cpu. Mimi stays float32
    seed: int = 0
    temp: float | None = None  # None: the checkpoint's lm_gen_config, else moshi's default 0.8
    temp_text: float | None = None  # likewise; moshi's default 0.7
    top_k: int | None = None  # likewise; 250
    top_k_text: int | None = None  # likewise; 25
    threads: int | None = None  # torch.set_num_threads for this process; None: torch's default

    @classmethod
    def parse(cls, options: dict[str, Any]) -> "MoshiOptions":
        known = cls.__dataclass_fields__
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ModelConfigError(f"moshi: unknown option(s) {', '.join(unknown)}; known: "
                                   f"{', '.join(known)}")
        missing = [k for k in ("mimi_weights", "lm_weights", "tokenizer") if not options.get(k)]
        if missing:
            raise ModelConfigError(f"moshi: option(s) {', '.join(missing)} not set (local "
                                   "checkpoint files; nothing is downloaded)")
        values: dict[str, Any] = {}
        for key, value in options.items():
            if value is None or value == "":
                continue
            kind = {"seed": int, "top_k": int, "top_k_text": int, "temp": float,
                    "temp_text": float, "threads": int}.get(key, str)
            try:
                values[key] = kind(value)
            except (TypeError, ValueError):
                raise ModelConfigError(f"moshi: option {key} must be {kind.__name__}, got "
                                       f"{value!r}") from None
        opts = cls(**values)
        if opts.dtype not in ("auto",) + DTYPES:
            raise ModelConfigError(f"moshi: option dtype must be auto or one of "
                                   f"{', '.join(DTYPES)}, got {opts.dtype!r}")
        for key in ("temp", "temp_text"):
            v = getattr(opts, key)
            if v is not None and not v >= 0:
                raise ModelConfigError(f"moshi: option {key} must be >= 0 (0: greedy), got {v}")
        if opts.threads is not None and opts.threads < 1:
            raise ModelConfigError(f"moshi: option threads must be >= 1, got {opts.threads}")
        return opts

    def check_files(self) -> None:
        problems = []
        for f in BUILTINS["moshi"].files:
            value = getattr(self, f.option)
            if value:
                problems += local_file_problem(f.option, f.what, value)
        if problems:
            raise NotReady("model 'moshi' cannot run here: " + "; ".join(problems))

    def torch_device(self, torch):
        name = self.device
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            return torch.device(name)
        except RuntimeError as e:
            raise ModelConfigError(f"moshi: option device {self.device!r}: {e}") from None

    def torch_dtype(self, torch, device):
        name = self.dtype
        if name == "auto":
            name = "bfloat16" if device.type == "cuda" else "float32"
        return getattr(torch, name)


def _json_file(option: str, path: str) -> dict:
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelConfigError(f"moshi: option {option}: cannot read {path!r} as JSON: "
                               f"{e}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"moshi: option {option}: {path!r} must hold a JSON object")
    return data


def load(opts: MoshiOptions) -> MoshiModel:
    """Load Mimi, the LM and the tokenizer from local files through moshi's own loaders
    (``CheckpointInfo`` built directly, never ``from_hf_repo``)."""
    import torch
    from moshi.models import loaders

    opts.check_files()
    lm_config, model_type, lm_gen_config = None, "moshi", {}
    if opts.lm_config:
        raw = _json_file("lm_config", opts.lm_config)
        lm_config = {k: v for k, v in raw.items() if k not in _CONFIG_ONLY_KEYS}
        model_type = raw.get("model_type", "moshi")
        lm_gen_config = dict(raw.get("lm_gen_config") or {})
        if model_type != "moshi":
            raise ModelConfigError(f"moshi: {opts.lm_config!r} is a {model_type!r} checkpoint; "
                                   "only full-duplex dialogue checkpoints (model_type 'moshi') "
                                   "are supported")
        if lm_config.get("lora") or lm_config.get("conditioners"):
            raise ModelConfigError(f"moshi: {opts.lm_config!r} needs LoRA weights or "
                                   "conditioning, which this adapter does not support")
    mimi_config = _json_file("mimi_config", opts.mimi_config) if opts.mimi_config else None
    device = opts.torch_device(torch)
    if opts.threads:  # process-wide; small models on shared cores run far faster on one
        torch.set_num_threads(opts.threads)
    info = loaders.CheckpointInfo(
        moshi_weights=Path(opts.lm_weights).expanduser(),
        mimi_weights=Path(opts.mimi_weights).expanduser(),
        tokenizer=Path(opts.tokenizer).expanduser(), lm_config=lm_config,
        mimi_config=mimi_config, model_type=model_type, lm_gen_config=lm_gen_config)
    try:
        mimi = info.get_mimi(device=device)
        lm = info.get_moshi(device=device, dtype=opts.torch_dtype(torch, device))
        tokenizer = info.get_text_tokenizer()
    except ModelError:
        raise
    except Exception as e:  # a file that is not the checkpoint its option says it is
        raise ModelConfigError(f"moshi: cannot load the checkpoint files ({type(e).__name__}: "
                               f"{e}); check mimi_weights, lm_weights, tokenizer and "
                               "lm_config/mimi_config belong together") from e
    sampling = dict(lm_gen_config)
    for key in ("temp", "temp_text", "top_k", "top_k_text"):
        if getattr(opts, key) is not None:
            sampling[key] = getattr(opts, key)
    return MoshiModel(mimi, lm, tokenizer, seed=opts.seed, sampling=sampling)


def factory(**options: Any) -> MoshiModel:
    """Build ``moshi`` from ``--duplexact-model-option`` values (docs/models.md)."""
    return load(MoshiOptions.parse(options))


def preflight(**options: Any) -> None:
    """Check the options and the files without importing moshi or loading weights."""
    MoshiOptions.parse(options).check_files()


factory = Adapter(factory, preflight=preflight)
