"""The bundled fixture set (fixtures/, docs/fixtures.md): complete, exact, and regenerable.

Annotations are checked against the audio itself (where speech really starts and stops),
not only against the manifest, so a generator bug that shifts a phrase cannot hide.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest

from pytest_duplexact.data import audio, taxonomy
from pytest_duplexact.data.annotations import Instance
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.timeline import count_words
from pytest_duplexact.rules import requires

SR = audio.SAMPLE_RATE
EXACT_S = 0.004  # a phrase edge is the first/last sample of a 5 ms window above threshold


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(bundled_root(), requires=requires)


@lru_cache(maxsize=None)
def samples(path) -> np.ndarray:
    return audio.read(path)


def sounding(x: np.ndarray, start: float, end: float) -> np.ndarray:
    """Indices (relative to ``start``) of samples that are not digital silence."""
    seg = x[int(round(start * SR)): int(round(end * SR))]
    return np.flatnonzero(np.abs(seg) > 2 / 32768)


def speech_edges(x: np.ndarray, start: float = 0.0, end: float | None = None):
    idx = sounding(x, start, len(x) / SR if end is None else end)
    return start + idx[0] / SR, start + (idx[-1] + 1) / SR


def speech_span(inst: Instance, role: str) -> float:
    words = inst.clip(role).transcript
    return words[-1].end - words[0].start


def level_db(x: np.ndarray) -> float:
    x = x.astype(np.float64)
    return 10 * np.log10(np.mean(x[np.abs(x) > 0.1 * np.abs(x).max()] ** 2))


def of(dataset, action: str) -> list[Instance]:
    return [i for i in dataset.instances if i.action == action]


# --- coverage --------------------------------------------------------------------------------

def test_every_condition_has_three_instances_in_three_scenarios(dataset):
    for cond in taxonomy.CONDITIONS:
        mine = dataset.by_condition(cond.action, cond.id)
        assert len(mine) >= 3, cond.key
        assert len({i.scenario for i in mine}) >= 3, cond.key


def test_all_scenarios_present_and_synthesized(dataset):
    assert set(Counter(i.scenario for i in dataset.instances)) == \
        set(taxonomy.SCENARIOS) - {"unspecified"}
    assert {i.source for i in dataset.instances} == {"synthesized"}
    assert dataset.name == "duplexact-bundled"


def test_ids_name_action_condition_scenario(dataset):
    for i in dataset.instances:
        assert re.fullmatch(rf"{i.action}-{i.condition}-{i.scenario}-\d\d", i.id), i.id


def test_clips_are_16k_mono_flac(dataset):
    for i in dataset.instances:
        for clip in i.clips.values():
            assert clip.path.suffix == ".flac"
            assert audio.info(clip.path)[:2] == (SR, 1), clip.path


# --- annotations lie inside their clips and match the audio ------------------------------------

def test_every_annotation_and_word_inside_its_clip(dataset):
    user_clock = ("user_start", "user_end", "pause_start", "pause_end", "other_start",
                  "other_end", "interrupt_target", "backchannel_point")
    for i in dataset.instances:
        for name in user_clock:
            v = getattr(i.annotations, name)
            if v is not None:
                assert 0 <= v <= i.clip("user").duration, (i.id, name)
        for name in ("cue_start", "cue_end"):
            v = getattr(i.annotations, name)
            if v is not None:
                assert 0 <= v <= i.clip("cue").duration, (i.id, name)
        for role, clip in i.clips.items():
            assert clip.transcript, (i.id, role)
            for w in clip.transcript:
                assert 0 <= w.start <= w.end <= clip.duration, (i.id, role, w)
            starts = [w.start for w in clip.transcript]
            assert starts == sorted(starts), (i.id, role)


def test_user_speech_edges_are_where_the_audio_says(dataset):
    for i in dataset.instances:
        if "user" not in i.clips:
            continue
        x = samples(i.clip("user").path)
        first, last = speech_edges(x)
        assert abs(first - i.annotations.user_start) < EXACT_S, i.id
        assert abs(last - i.annotations.user_end) < EXACT_S, i.id
        # Lean clips: the pipelines add their own silence.
        assert 0.2 <= i.annotations.user_start <= 0.4, i.id
        assert i.clip("user").duration - i.annotations.user_end <= 0.3, i.id


def test_cue_edges_are_where_the_audio_says(dataset):
    for i in dataset.instances:
        if i.annotations.cue_start is None:
            continue
        first, last = speech_edges(samples(i.clip("cue").path))
        assert abs(first - i.annotations.cue_start) < EXACT_S, i.id
        assert abs(last - i.annotations.cue_end) < EXACT_S, i.id
        assert 0.4 <= i.annotations.cue_end - i.annotations.cue_start <= 3.0, i.id


# --- per action --------------------------------------------------------------------------------

def test_wait_pauses_and_continuous_speech(dataset):
    for i in of(dataset, "wait"):
        a, x = i.annotations, samples(i.clip("user").path)
        if i.condition == "continuous_speech":
            assert a.pause_start is None
            assert a.user_end - a.user_start >= 3.0, i.id
            idx = sounding(x, a.user_start, a.user_end)
            assert np.diff(idx).max() / SR <= 0.2, i.id
        else:
            assert 0.4 <= a.pause_end - a.pause_start <= 0.9, i.id
            assert sounding(x, a.pause_start + EXACT_S, a.pause_end - EXACT_S).size == 0, i.id
            # ... and it is the only silence longer than 0.2 s in the turn.
            idx = sounding(x, a.user_start, a.user_end)
            assert (np.diff(idx) / SR > 0.2).sum() == 1, i.id
        assert 2.0 <= speech_span(i, "reference") <= 4.0, i.id


def test_ignore_distractor_inside_the_turn_at_the_spec_level(dataset):
    for i in of(dataset, "ignore"):
        a, x = i.annotations, samples(i.clip("user").path)
        assert a.user_start < a.other_start < a.other_end < a.user_end, i.id
        assert i.text("ignored") in i.text("user"), i.id
        first, last = speech_edges(x, a.other_start - 0.2, a.other_end + 0.2)
        assert abs(first - a.other_start) < EXACT_S and abs(last - a.other_end) < EXACT_S
        # SPEC §8: other-directed -8 dB, background -15 dB below the addressed speech.
        drop = level_db(x[: int(a.other_start * SR)]) - level_db(
            x[int(a.other_start * SR): int(a.other_end * SR)])
        expected = 8.0 if i.condition == "other_directed_speech" else 15.0
        assert abs(drop - expected) < 2.5, (i.id, drop)
        assert count_words(i.text("reference")) >= 5


def test_take_turn_references(dataset):
    for i in of(dataset, "take_turn"):
        assert count_words(i.text("reference")) >= 5, i.id


def test_backchannel_point_clip_and_turn(dataset):
    for i in of(dataset, "backchannel"):
        a, x = i.annotations, samples(i.clip("user").path)
        assert a.user_end - a.user_start >= 5.0, i.id
        assert a.user_start < a.backchannel_point < a.user_end, i.id
        # The point sits in a real gap between phrases of at least 0.3 s.
        before = sounding(x, a.user_start, a.backchannel_point)
        gap_start = a.user_start + (before[-1] + 1) / SR
        gap_end = a.backchannel_point + sounding(x, a.backchannel_point, a.user_end)[0] / SR
        assert gap_end - gap_start >= 0.3, i.id
        assert count_words(i.text("backchannel")) <= taxonomy.BACKCHANNEL_MAX_WORDS, i.id
        assert count_words(i.clip("backchannel").text) <= taxonomy.BACKCHANNEL_MAX_WORDS
        assert count_words(i.text("reference")) >= 5, i.id


def test_interrupt_target_and_interruption(dataset):
    for i in of(dataset, "interrupt"):
        a = i.annotations
        assert a.user_end - a.user_start >= 7.0, i.id
        assert a.user_start < a.interrupt_target <= a.user_end - 2.5, i.id
        assert count_words(i.text("reference")) >= 6, i.id
        assert 2.0 <= speech_span(i, "reference") <= 4.0, i.id


@pytest.mark.parametrize("action", ["stop", "hold_floor", "recover"])
def test_simulator_clips(dataset, action):
    for i in of(dataset, action):
        assert 2.0 <= speech_span(i, "lead_in") <= 4.0, i.id
        assert speech_span(i, "reference") >= 9.0, i.id
        # The long answer is continuous: no gap over 0.25 s, so a cue lands mid-speech.
        ref = samples(i.clip("reference").path)
        start, end = speech_edges(ref)
        assert np.diff(sounding(ref, start, end)).max() / SR <= 0.25, i.id
        if action == "recover":
            assert count_words(i.text("recovery")) >= 5, i.id
            assert 2.0 <= speech_span(i, "recovery") <= 5.0, i.id


def test_hold_floor_distractor_cues_are_rendered_per_spec(dataset):
    addressed = {i.id: level_db(samples(i.clip("cue").path))
                 for i in dataset.by_condition("hold_floor", "continue")}
    ref_level = float(np.mean(list(addressed.values())))
    for cond, drop in (("other_directed_speech", 8.0), ("background_speech", 15.0)):
        for i in dataset.by_condition("hold_floor", cond):
            measured = ref_level - level_db(samples(i.clip("cue").path))
            assert abs(measured - drop) < 2.5, (i.id, measured)


def test_texts_match_the_clip_transcripts(dataset):
    for i in dataset.instances:
        for role in ("user", "reference", "backchannel", "recovery", "cue"):
            if role in i.clips and role in i.texts:
                assert i.clip(role).text == i.text(role), (i.id, role)


# --- regeneration ------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_regenerating_one_instance_per_action_reproduces_it(dataset, tmp_path):
    from pytest_duplexact.fixturegen.dataset_writer import generate

    ids = [of(dataset, action)[0].id for action in taxonomy.ACTIONS]
    summary = generate(tmp_path, only=ids, log=None)
    assert summary.written == len(ids)
    fresh = {i.id: i for i in load_dataset(tmp_path, requires=requires).instances}
    assert set(fresh) == set(ids)
    for old in (i for i in dataset.instances if i.id in fresh):
        new = fresh[old.id]
        for name, v in vars(old.annotations).items():
            if v is None:
                assert getattr(new.annotations, name) is None, (old.id, name)
            else:
                assert abs(getattr(new.annotations, name) - v) < 1e-3, (old.id, name)
        assert new.texts == old.texts
        for role, clip in old.clips.items():
            assert new.clip(role).transcript == clip.transcript, (old.id, role)
            assert abs(new.clip(role).duration - clip.duration) < 1e-3, (old.id, role)


# --- the source file ---------------------------------------------------------------------------

def test_source_problems_name_the_entry_and_field(tmp_path):
    from pytest_duplexact.fixturegen import source

    raw = source.load(bundled_root() / "source" / "transcripts.toml")
    assert len(raw.entries) == len(load_dataset(bundled_root(), requires=requires).instances)
    text = (bundled_root() / "source" / "transcripts.toml").read_text()
    broken = (text.replace('condition = "take_turn.delayed"', 'condition = "take_turn.later"', 1)
              .replace('{ pause = 0.6 }', '{ pause = 1.6 }', 1)
              .replace('talk = "router"', 'talk = "modem"', 1))
    path = tmp_path / "transcripts.toml"
    path.write_text(broken)
    with pytest.raises(source.SourceError) as info:
        source.load(path)
    problems = info.value.problems
    assert all(p.startswith(f"{path} ") for p in problems)
    assert any("field 'condition': unknown condition 'take_turn.later'" in p for p in problems)
    assert any("(wait-inter_sentential_pause-casual-01) field 'user': the pause must last"
               in p for p in problems)
    assert any("(stop-direct_interruption-customer_service-01) field 'talk': unknown talk "
               "'modem'" in p for p in problems)


# --- a user's own source ---------------------------------------------------------------------

SMALL_SOURCE = '''
format = "duplexact-fixture-source"
version = 1
source = "synthesized"

[voices]
user = ["en-us"]
speeds = [170]
model = "en-us+m8"
model_speed = 170
background = ["en-gb-scotland"]

[[instance]]
condition = "take_turn.delayed"
scenario = "casual"
user = ["Let's get pizza tonight.", "Actually, let's cook something healthy."]
reference = "Sure, let's cook a stir fry."
'''


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_a_small_custom_source_renders_under_its_own_name(tmp_path, capsys):
    """A user's one-instance source renders without --only (the three-per-condition coverage
    is the bundled set's promise, not a user's), is named after its folder, not
    duplexact-bundled, and says what it covers."""
    from pytest_duplexact.cli import main as duplexact
    from pytest_duplexact.fixturegen.__main__ import main

    src = tmp_path / "mine.toml"
    src.write_text(SMALL_SOURCE)
    out = tmp_path / "my-set"
    assert main(["--source", str(src), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote 1 instance(s)" in printed
    assert "the source covers 1 of 24 conditions (take_turn.delayed)" in printed
    header = json.loads((out / "dataset.json").read_text())
    assert header["name"] == "my-set" and "bundled" not in header["description"].lower()
    assert [i.id for i in load_dataset(out, requires=requires).instances] == \
        ["take_turn-delayed-casual-01"]
    assert duplexact(["validate", str(out)]) == 0

    # a name in the source, or --name, wins
    src.write_text(SMALL_SOURCE.replace('source = "synthesized"',
                                        'source = "synthesized"\nname = "team-smoke"'))
    assert main(["--source", str(src), "--out", str(out)]) == 0
    assert json.loads((out / "dataset.json").read_text())["name"] == "team-smoke"
    assert main(["--source", str(src), "--out", str(out), "--name", "nightly"]) == 0
    assert json.loads((out / "dataset.json").read_text())["name"] == "nightly"
    # refreshing one instance keeps the set's name
    assert main(["--source", str(src), "--out", str(out), "--only",
                 "take_turn-delayed-casual-01"]) == 0
    assert json.loads((out / "dataset.json").read_text())["name"] == "nightly"


def test_a_custom_source_never_overwrites_the_bundled_set(tmp_path):
    """Refused for a folder whose dataset.json is the bundled set (a checkout's, whatever
    is installed) and for the bundled name; checked on a copy of the header, never on the
    repository's own folder."""
    from pytest_duplexact.fixturegen import dataset_writer, source

    src = tmp_path / "mine.toml"
    src.write_text(SMALL_SOURCE)
    checkout = tmp_path / "fixtures"
    checkout.mkdir()
    header = (bundled_root() / "dataset.json").read_text()
    (checkout / "dataset.json").write_text(header)
    with pytest.raises(source.SourceError, match="refusing to write a custom source as the "
                                                 "bundled fixture set"):
        dataset_writer.generate(checkout, src, log=None)
    assert sorted(p.name for p in checkout.iterdir()) == ["dataset.json"]
    assert (checkout / "dataset.json").read_text() == header
    with pytest.raises(source.SourceError, match="another --name"):
        dataset_writer.generate(tmp_path / "elsewhere", src, log=None, name="duplexact-bundled")
    assert not (tmp_path / "elsewhere").exists()


def test_source_header_problems_name_the_field(tmp_path):
    from pytest_duplexact.fixturegen import source

    empty = tmp_path / "empty.toml"
    head = SMALL_SOURCE[: SMALL_SOURCE.index("[voices]")]
    empty.write_text(head + 'name = ""\n' + SMALL_SOURCE[len(head): SMALL_SOURCE.index(
        "[[instance]]")])
    with pytest.raises(source.SourceError) as info:
        source.load(empty)
    problems = info.value.problems
    assert any("header field 'name': must be a non-empty string" in p for p in problems)
    assert any("field 'instance': no [[instance]] entries" in p for p in problems)
