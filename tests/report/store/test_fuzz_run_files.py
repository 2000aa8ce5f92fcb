"""Fuzzing what a run reads back from disk: shard reports for ``duplexact merge``, saved
recordings for ``recorded:DIR``, and outcome.json for ``--duplexact-resume``. hypothesis
draws hostile files from valid ones: a field of any path replaced by a value of the wrong
type, a number too large for a float (or for Python's int parser), NaN and infinity, a string
of a megabyte, JSON nested up to 100,000 deep, a field deleted or an unknown one added; for
recordings also truncated, foreign, resampled, stereo, longer or shorter tracks, a WAV whose
header claims hours, and hours of FLAC silence.

Every input is accepted, or refused in one line with no traceback: merge exits 0 or 2 with one
``duplexact merge: ...`` line on stderr; ``recorded:`` gives a Recording or a one-line
``ModelError``; the journal gives an entry. And memory stays under ``MEMORY_BOUND``.

CI runs a bounded, derandomized number of examples (the same ones every run);
``DUPLEXACT_FUZZ_EXAMPLES=N`` runs a longer, random campaign of N examples per property
(its counts and the peak RSS are printed: ``-s``)."""

from __future__ import annotations

import argparse
import io
import json
import resource
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_duplexact.data.recording import Recording
from pytest_duplexact.data.recording_io import RECORDING_FILE, save_recording
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers.recorded import RecordedModel
from pytest_duplexact.report.store.merge import main as merge_main
from pytest_duplexact.run import journal
from tests.pipelines.helpers import direct_instance
from tests.report.store.test_merge import _shards

_LONG = int(__import__("os").environ.get("DUPLEXACT_FUZZ_EXAMPLES", "0"))
MEMORY_BOUND = 500 << 20  # growth of the process's peak RSS over one property
RAW = "@@raw@@"  # replaced by raw JSON text json.dumps cannot write (it would recurse, or
# refuse an int of more than 4,300 digits)


def fuzz(n: int):
    """``n`` examples in CI (derandomized: the same ones every run), or the campaign's count."""
    return settings(max_examples=_LONG or n, deadline=None, database=None,
                    derandomize=not _LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


class Campaign:
    """Counts what the examples did and the peak RSS they reached, for the notes."""

    def __init__(self, name: str):
        self.name, self.seen, self.start = name, {}, None

    def begin(self) -> None:
        """At each example's start: the first one sets the baseline (after the fixtures)."""
        if self.start is None:
            self.start = _peak()

    def saw(self, what: str) -> None:
        self.seen[what] = self.seen.get(what, 0) + 1

    def done(self) -> None:
        grown = _peak() - (self.start or _peak())
        print(f"\n{self.name}: {sum(self.seen.values())} examples {self.seen}; peak RSS "
              f"{_peak() >> 20} MiB (+{grown >> 20} MiB)")
        assert grown < MEMORY_BOUND, f"peak RSS grew {grown >> 20} MiB"


# --- hostile JSON ---------------------------------------------------------------------------

# digits of a number too large for a float, or for Python's int parser (4,300 digits)
huge_int = st.integers(300, 5000).map(lambda k: ("int", k))
junk = st.one_of(
    st.none(), st.booleans(), st.integers(), huge_int, st.integers().map(lambda x: -x),
    st.floats(allow_nan=True, allow_infinity=True), st.just(1e308),
    st.text(max_size=20), st.just("x" * (1 << 20)),
    st.lists(st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=5)),
                    max_size=3),
    st.integers(0, 300).map(lambda k: 10 ** k),
    st.integers(1, 100_000).map(lambda n: ("deep", n)))


def _paths(value, prefix=(), depth=4) -> list[tuple]:
    """Every path into ``value`` down to ``depth`` (keys and list indices, lists cut at 3)."""
    out = [prefix] if prefix else []
    if depth == 0:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,), depth - 1)
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            out += _paths(v, prefix + (i,), depth - 1)
    return out


@st.composite
def mutations(draw, base: dict, n_max: int = 3):
    """(operation, path, value) edits of ``base``: set a path to junk, delete it, or add a
    key beside it."""
    paths = _paths(base)
    # a section's own field as often as any of the many fields of its instances
    near = [p for p in paths if len(p) <= 2]
    edits = []
    for _ in range(draw(st.integers(1, n_max))):
        op = draw(st.sampled_from(["set", "set", "delete", "add"]))
        path = draw(st.one_of(st.sampled_from(near), st.sampled_from(paths)))
        edits.append((op, path, draw(junk), draw(st.text(min_size=1, max_size=8))))
    return edits


def _apply(base: dict, edits) -> str:
    """The edited document as the text a hostile file holds."""
    doc = json.loads(json.dumps(base))
    raw = []
    for op, path, value, key in edits:
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            if isinstance(value, tuple):  # raw text, spliced in below
                kind, n = value
                raw.append("[" * n + "]" * n if kind == "deep" else "1" + "0" * n)
                value = f"{RAW}{len(raw) - 1}"
            if op == "set":
                parent[path[-1]] = value
            elif op == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[key] = value
        except (KeyError, IndexError, TypeError):  # an earlier edit removed the way there
            continue
    text = json.dumps(doc, allow_nan=True)
    for i, piece in enumerate(raw):
        text = text.replace(f'"{RAW}{i}"', piece)
    return text


def _one_line(text: str, prefix: str) -> None:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), text[:2000]
    assert "Traceback" not in text, text[:2000]


# --- duplexact merge ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shard_texts(tmp_path_factory):
    _, paths = _shards(tmp_path_factory.mktemp("shards"), n=2)
    return [json.loads(p.read_text()) for p in paths]


MERGE = Campaign("merge fuzz")


@fuzz(60)
@given(data=st.data())
def test_merge_of_hostile_shard_reports_is_merged_or_one_line(shard_texts, tmp_path, data,
                                                              capsys):
    MERGE.begin()
    which = data.draw(st.integers(0, 1))
    edits = data.draw(mutations(shard_texts[which]))
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = []
    for k, rep in enumerate(shard_texts):
        p = folder / f"shard{k}.json"
        p.write_text(_apply(rep, edits) if k == which else json.dumps(rep))
        paths.append(p)
    out = folder / "merged.json"
    out.unlink(missing_ok=True)
    capsys.readouterr()
    rc = merge_main(argparse.Namespace(reports=[str(p) for p in paths], output=str(out)))
    said = capsys.readouterr()
    if rc == 0:
        json.loads(out.read_text())
        MERGE.saw("merged")
    else:
        assert rc == 2, said
        _one_line(said.err, "duplexact merge: ")
        assert not out.exists()
        MERGE.saw("refused")


def test_merge_campaign_memory():
    MERGE.done()


# --- recorded: --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A valid saved recording of a Direct Replay instance, and what its files hold."""
    tmp = tmp_path_factory.mktemp("recorded")
    inst = direct_instance(tmp / "data", "take_turn", "immediate")
    t = np.arange(16_000 * 3) / 16_000
    rec = Recording(input=(0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32),
                    output=(0.1 * np.sin(2 * np.pi * 330 * t)).astype(np.float32))
    folder = save_recording(rec, tmp / "good" / inst.id, instance_id=inst.id)
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    hours = io.BytesIO()  # two hours of silence: a few hundred kB of FLAC
    with sf.SoundFile(hours, "w", samplerate=16_000, channels=1, format="FLAC",
                      subtype="PCM_16") as f:
        block = np.zeros(16_000 * 60, np.int16)
        for _ in range(120):
            f.write(block)
    return inst, files, hours.getvalue()


def _wav(samples: np.ndarray, rate: int, fmt: str = "WAV") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format=fmt, subtype="PCM_16")
    return buf.getvalue()


def _lying_wav(seconds: int) -> bytes:
    """A WAV header claiming ``seconds`` of 16 kHz audio, followed by almost nothing."""
    n = seconds * 16_000 * 2
    header = (b"RIFF" + struct.pack("<I", 36 + n) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, 16_000, 32_000, 2, 16) + b"data" + struct.pack("<I", n))
    return header + b"\0" * 64


@st.composite
def tracks(draw, good: bytes, hours: bytes):
    """A hostile track file's bytes and the name it is stored under."""
    n = draw(st.sampled_from([0, 1, 100, 16_000, 48_000, 49_000]))
    kind = draw(st.sampled_from(["truncated", "random", "length", "rate", "stereo", "lying",
                                 "hours", "wav_as_flac", "empty", "nan"]))
    name = draw(st.sampled_from(["output.flac", "input.flac", "output.wav"]))
    if kind == "truncated":
        data = good[:draw(st.integers(0, len(good)))]
    elif kind == "random":
        data = draw(st.binary(max_size=4096))
    elif kind == "length":
        data = _wav(np.zeros(n, np.float32), 16_000, "FLAC")
    elif kind == "rate":
        data = _wav(np.zeros(max(n, 1), np.float32), draw(st.sampled_from(
            [1, 8, 8000, 44_100, 96_000, 192_000])), "WAV")
    elif kind == "stereo":
        data = _wav(np.zeros((max(n, 1), 2), np.float32), 16_000, "FLAC")
    elif kind == "lying":
        data = _lying_wav(draw(st.sampled_from([601, 7200, 10 ** 5])))
    elif kind == "hours":
        data = hours
    elif kind == "wav_as_flac":
        data = _wav(np.zeros(48_000, np.float32), 16_000, "WAV")
    elif kind == "nan":
        buf = io.BytesIO()
        sf.write(buf, np.full(48_000, np.nan, np.float32), 16_000, format="WAV",
                 subtype="FLOAT")
        data = buf.getvalue()
    else:
        data = b""
    return kind, name, data


RECORDED = Campaign("recorded: fuzz")


@fuzz(60)
@given(data=st.data())
def test_recorded_hostile_recordings_are_replayed_or_one_line(recorded, tmp_path, data):
    RECORDED.begin()
    inst, files, hours = recorded
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = root / "instances" / inst.id
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    what = data.draw(st.sampled_from(["json", "track", "both"]))
    if what in ("json", "both"):
        meta = json.loads(files[RECORDING_FILE])
        (folder / RECORDING_FILE).write_text(_apply(meta, data.draw(mutations(meta))))
    if what in ("track", "both"):
        kind, name, content = data.draw(tracks(files["output.flac"], hours))
        (folder / name).write_bytes(content)
        what += f":{kind}"
    try:
        rec = RecordedModel(root).recording_for(inst)
    except ModelError as e:
        _one_line(str(e), "")
        RECORDED.saw(f"refused {what}")
    else:
        assert len(rec.input) <= 600 * 16_000 + 1 and len(rec.output) <= 600 * 16_000 + 1
        RECORDED.saw(f"replayed {what.split(':')[0]}")


def test_recorded_campaign_memory():
    RECORDED.done()


# --- the resume journal -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished_outcome(tmp_path_factory):
    """A finished instance folder of a real (oracle) run, and its outcome.json."""
    from pytest_duplexact.data.instance import bundled_root, load_dataset
    from pytest_duplexact.rules import requires
    from pytest_duplexact.run.harness import Harness
    from pytest_duplexact.run.settings import RunSettings

    run = tmp_path_factory.mktemp("journal")
    inst = next(i for i in load_dataset(bundled_root(), requires=requires).instances
                if i.action == "take_turn")
    settings = RunSettings(model="oracle")
    h = Harness.from_settings(settings, run)
    h.run(inst)
    folder = h.instance_dir(inst)
    return folder, inst.id, settings.fingerprint(), json.loads(
        (folder / journal.OUTCOME_FILE).read_text())


JOURNAL = Campaign("journal fuzz")


@fuzz(60)
@given(data=st.data())
def test_a_hostile_outcome_is_an_entry_never_a_traceback(finished_outcome, data):
    JOURNAL.begin()
    folder, iid, fp, good = finished_outcome
    path = folder / journal.OUTCOME_FILE
    try:
        path.write_text(_apply(good, data.draw(mutations(good))))
        entry = journal.read_entry(folder, iid, fp, 100.0)
        assert isinstance(entry, journal.Entry)
        assert entry.status is not journal.Status.FINISHED or entry.outcome is not None
        JOURNAL.saw(entry.status.value)
    finally:
        path.write_text(json.dumps(good))


def test_journal_campaign_memory():
    JOURNAL.done()


def test_the_mutations_reach_deep_and_wide():
    """The strategy can write what the module doc promises (a guard on the fuzzer itself)."""
    base = {"a": {"b": [1, 2]}, "c": "x"}
    assert ("a", "b", 0) in _paths(base)
    text = _apply(base, [("set", ("a", "b"), ("deep", 100_000), "k"),
                         ("add", ("c",), float("nan"), "zz"), ("delete", ("c",), 0, "k"),
                         ("set", ("a",), ("int", 5000), "k")])
    assert '"zz": NaN' in text and '"c"' not in text and "1" + "0" * 5000 in text
    assert text.count("[") == 0  # "a" and its nested list were replaced by the number
    assert _apply(base, [("set", ("a", "b"), ("deep", 1000), "k")]).count("[") == 1000
