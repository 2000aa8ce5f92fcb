"""silero-vad's network, run through ONNX Runtime or TorchScript (docs/timeline.md, section 1).

Both run the same silero-vad 6.2.3 weights shipped inside its wheel, nothing is downloaded:

* ``onnx`` (the default when onnxruntime is installed): ``silero_vad_16k_sequence.onnx``, the
  wheel's "sequence" export, which runs up to ``BLOCK_FRAMES`` frames per call with the
  recurrent state passed in and out explicitly. No Python per frame, no shared state (so no
  lock), no torch at inference: ~6x less CPU than TorchScript on the bundled clips.
* ``torch``: ``silero_vad.jit`` through TorchScript, one call per 32 ms frame; the fallback.

The two agree to ~5e-5 in probability per frame, and give identical spans on every bundled
clip and on the noise grid (tests/listen/test_vad_network.py, benchmarks/harness_performance.py part
``backends``). Choose with ``DUPLEXACT_VAD_BACKEND=onnx|torch|auto`` (``auto``, the default:
onnx when onnxruntime imports, else torch). The backend is part of the VAD cache key.
"""

from __future__ import annotations

import os
import threading
import warnings
from importlib.util import find_spec
from pathlib import Path

import numpy as np

ENV = "DUPLEXACT_VAD_BACKEND"
BACKENDS = ("onnx", "torch")
SAMPLE_RATE = 16_000
FRAME = 512  # 32 ms at 16 kHz
CONTEXT = 64  # silero prepends the previous frame's last 64 samples to each frame
BLOCK_FRAMES = 512  # frames per ONNX call (16.4 s; ~1.2 MB of input), silero's own default

_load_lock = threading.Lock()
_torch_lock = threading.Lock()  # the TorchScript model keeps recurrent state: one caller
_onnx_session = None
_torch_model = None


def backend() -> str:
    """The backend this process uses: ``$DUPLEXACT_VAD_BACKEND`` (onnx, torch or auto)."""
    choice = os.environ.get(ENV, "").strip().lower() or "auto"
    if choice == "auto":
        try:
            import onnxruntime  # noqa: F401 (only whether it imports)
        except ImportError:
            return "torch"
        return "onnx"
    if choice not in BACKENDS:
        raise ValueError(f"{ENV}={choice!r}: expected one of onnx, torch, auto")
    return choice


def _session():
    global _onnx_session
    with _load_lock:
        if _onnx_session is None:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            # one thread: with pytest-xdist workers sharing the cores, more threads per
            # process only contend (the same measurement as torch's, docs/timeline.md)
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            path = _weights("silero_vad_16k_sequence.onnx")
            _onnx_session = ort.InferenceSession(str(path), sess_options=opts,
                                                 providers=["CPUExecutionProvider"])
    return _onnx_session


def _weights(name: str) -> Path:
    """A file of silero-vad's wheel, found without importing the package (its ``__init__``
    imports torch: 2 s of CPU the ONNX backend does not need)."""
    spec = find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("silero-vad is not installed: pip install 'silero-vad==6.2.3'")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / name


def _torch():
    global _torch_model
    with _load_lock:
        if _torch_model is None:
            import torch
            from silero_vad import load_silero_vad

            torch.set_num_threads(1)
            with warnings.catch_warnings():  # silero's loader uses APIs torch deprecates
                warnings.simplefilter("ignore", DeprecationWarning)
                _torch_model = load_silero_vad()
    return _torch_model


def _frames(x: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The frames ``run`` selects, each 512 samples (the last zero-padded)."""
    n = len(run)
    padded = np.zeros(n * FRAME, dtype=np.float32)
    padded[: len(x)] = x
    return padded.reshape(n, FRAME)[run]


def probabilities_onnx(x: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Probabilities of the frames ``run`` selects, in order, as if they were contiguous
    (each frame's context is the previous *selected* frame's tail, like the streaming model's
    internal context), so skipping quiet stretches behaves exactly as with torch."""
    frames = _frames(x, run)
    if not len(frames):
        return np.zeros(0, dtype=np.float32)
    context = np.zeros((len(frames), CONTEXT), dtype=np.float32)
    context[1:] = frames[:-1, -CONTEXT:]
    block = np.concatenate([context, frames], axis=1)
    session = _session()
    h = np.zeros((1, 1, 128), dtype=np.float32)
    c = np.zeros((1, 1, 128), dtype=np.float32)
    out = []
    for i in range(0, len(block), BLOCK_FRAMES):
        p, h, c = session.run(["speech_probs", "hn", "cn"],
                              {"input": block[i: i + BLOCK_FRAMES], "h": h, "c": c})
        out.append(p)
    return np.concatenate(out).reshape(-1).astype(np.float32, copy=False)


def probabilities_torch(x: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The same through TorchScript, one frame per call."""
    import torch

    frames = _frames(x, run)
    probs = np.zeros(len(frames), dtype=np.float32)
    with _torch_lock:
        model = _torch()
        model.reset_states()
        t = torch.from_numpy(frames)
        with torch.no_grad():
            for i in range(len(frames)):
                probs[i] = model(t[i], SAMPLE_RATE).item()
        model.reset_states()
    return probs


def probabilities(x: np.ndarray, run: np.ndarray, name: str | None = None) -> np.ndarray:
    """One probability per frame ``run`` selects, through backend ``name`` (default: the
    process's, ``backend()``)."""
    name = name or backend()
    if name == "onnx":
        return probabilities_onnx(x, run)
    if name == "torch":
        return probabilities_torch(x, run)
    raise ValueError(f"unknown VAD backend {name!r}: expected one of {', '.join(BACKENDS)}")


def versions(name: str) -> dict:
    """The package versions a backend's results depend on (part of the VAD cache key)."""
    from importlib.metadata import PackageNotFoundError, version

    package = "onnxruntime" if name == "onnx" else "torch"
    try:
        v = version(package)
    except PackageNotFoundError:
        v = None
    return {"backend": name, package: v}
