"""Recording layout round trip, recorded:DIR replay through run_instance, and
Full-Duplex-Bench-style folders."""

import json
import re

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data.recording_io import (
    RECORDING_FILE,
    RecordingFormatError,
    load_recording,
    save_recording,
)
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.pipelines import run_instance
from tests.pipelines.helpers import direct_instance, run, simulator_instance, tone


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rec")
    oracle = resolve_model("oracle")
    out = {}
    for inst in (direct_instance(tmp, "take_turn", "immediate"),
                 simulator_instance(tmp, "recover", "wrap_up"),
                 direct_instance(tmp, "interrupt", "help")):
        out[inst.action] = (inst, run(run_instance(inst, oracle)))
    return out


def test_round_trip(trials, tmp_path):
    for inst, rec in trials.values():
        folder = save_recording(rec, tmp_path / "instances" / inst.id, instance_id=inst.id)
        back = load_recording(folder)
        assert np.max(np.abs(back.output - rec.output)) < 1e-4  # PCM-16
        assert len(back.input) == len(rec.input)
        assert back.transcript == rec.transcript
        assert back.cue == rec.cue and back.user_sent_until == rec.user_sent_until
        assert back.events == rec.events
        meta = json.loads((folder / RECORDING_FILE).read_text())
        assert meta["instance"] == inst.id and meta["format"] == "duplexact-recording"


def test_flac_and_wav_hold_the_same_samples_and_a_resave_leaves_one_format(trials, tmp_path):
    inst, rec = trials["recover"]
    flac = save_recording(rec, tmp_path / "f", instance_id=inst.id)
    wav = save_recording(rec, tmp_path / "w", instance_id=inst.id, audio_format="wav")
    assert sorted(p.name for p in flac.iterdir()) == ["input.flac", "output.flac",
                                                      RECORDING_FILE]
    assert sorted(p.name for p in wav.iterdir()) == ["input.wav", "output.wav", RECORDING_FILE]
    a, b = load_recording(flac), load_recording(wav)
    assert np.array_equal(a.output, b.output) and np.array_equal(a.input, b.input)  # lossless
    assert (flac / "output.flac").stat().st_size < (wav / "output.wav").stat().st_size / 3
    save_recording(rec, flac, instance_id=inst.id, audio_format="wav")  # a re-run in wav
    assert not (flac / "output.flac").exists() and (flac / "output.wav").is_file()
    with pytest.raises(ValueError, match="audio format 'mp3'"):
        save_recording(rec, tmp_path / "m", audio_format="mp3")


def test_recorded_model_replays_through_run_instance(trials, tmp_path):
    for inst, rec in trials.values():
        save_recording(rec, tmp_path / "instances" / inst.id, instance_id=inst.id)
    model = resolve_model(f"recorded:{tmp_path}")
    for inst, rec in trials.values():
        back = run(run_instance(inst, model))
        assert back.cue == rec.cue and back.transcript == rec.transcript


def test_native_transcript_false_leaves_the_words_to_the_transcriber(trials, tmp_path):
    inst, rec = trials["take_turn"]
    assert rec.transcript  # the oracle gives its words
    save_recording(rec, tmp_path / "instances" / inst.id, instance_id=inst.id)
    back = resolve_model(f"recorded:{tmp_path}", native_transcript="false").recording_for(inst)
    assert back.transcript == () and np.array_equal(back.output, load_recording(
        tmp_path / "instances" / inst.id).output)
    assert resolve_model(f"recorded:{tmp_path}", native_transcript="true").recording_for(
        inst).transcript == rec.transcript
    with pytest.raises(ValueError, match="native_transcript='maybe': use true or false"):
        resolve_model(f"recorded:{tmp_path}", native_transcript="maybe")
    with pytest.raises(ValueError, match="takes only the option native_transcript "
                                         r"\(got speed\)"):
        resolve_model(f"recorded:{tmp_path}", speed="2")


def test_missing_and_mismatched_recordings(trials, tmp_path):
    inst, rec = trials["take_turn"]
    model = resolve_model(f"recorded:{tmp_path}")
    with pytest.raises(ModelError, match=f"no recording for instance {inst.id}"):
        model.recording_for(inst)
    save_recording(rec, tmp_path / inst.id, instance_id="someone-else")
    with pytest.raises(ModelError, match="is for instance 'someone-else'"):
        model.recording_for(inst)


def test_full_duplex_bench_folder(trials, tmp_path):
    inst, _ = trials["take_turn"]
    folder = tmp_path / inst.id
    folder.mkdir()
    sf.write(folder / "input.wav", tone(3.0), 16_000)
    sf.write(folder / "output.wav", tone(3.0), 24_000)  # 2 s at 24 kHz: resampled
    rec = resolve_model(f"recorded:{tmp_path}").recording_for(inst)
    assert len(rec.output) == 32_000 and rec.cue is None and rec.transcript == ()
    sim, _ = trials["recover"]
    (tmp_path / sim.id).mkdir()
    sf.write(tmp_path / sim.id / "input.wav", tone(1.0), 16_000)
    sf.write(tmp_path / sim.id / "output.wav", tone(1.0), 16_000)
    with pytest.raises(ModelError, match="can only replay Direct Replay"):
        resolve_model(f"recorded:{tmp_path}").recording_for(sim)


def test_bad_recording_json_names_the_field(trials, tmp_path):
    inst, rec = trials["recover"]
    folder = save_recording(rec, tmp_path / "x", instance_id=inst.id)
    meta = json.loads((folder / RECORDING_FILE).read_text())
    meta["cue"] = {"start": "soon"}
    (folder / RECORDING_FILE).write_text(json.dumps(meta))
    with pytest.raises(RecordingFormatError, match=r"field 'cue'"):
        load_recording(folder)
    (folder / "output.flac").unlink()
    with pytest.raises(RecordingFormatError, match=r"output.flac / output.wav: missing"):
        load_recording(folder)


# --- hostile recordings: bounded before decoding, checked against recording.json ----------

def _silent_flac(path, seconds, rate=16_000):
    """A FLAC of ``seconds`` of silence written in blocks (hours take a few hundred kB)."""
    block = np.zeros(rate * 60, np.int16)
    with sf.SoundFile(str(path), "w", samplerate=rate, channels=1, format="FLAC",
                      subtype="PCM_16") as f:
        for _ in range(int(seconds // 60)):
            f.write(block)


def test_a_track_over_the_limit_is_refused_from_its_header(trials, tmp_path):
    """Two hours of silence in a few hundred kB of FLAC: refused from the header, before a
    sample is decoded (it took RSS to 2.35 GB and was accepted with the wrong length)."""
    import resource

    from pytest_duplexact.data.recording_io import MAX_TRACK_S

    inst, rec = trials["take_turn"]
    folder = save_recording(rec, tmp_path / inst.id, instance_id=inst.id)
    _silent_flac(folder / "output.flac", 2 * 3600)
    assert (folder / "output.flac").stat().st_size < 2_000_000
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(RecordingFormatError, match=re.escape(
            f"output.flac: lasts 7200 s (from its header), over the {MAX_TRACK_S:.0f} s "
            "limit of one track")):
        load_recording(folder)
    # nothing near two hours was decoded (230 MB at 16 kHz float32)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 100_000  # KiB
    with pytest.raises(ModelError, match="over the 600 s limit"):
        resolve_model(f"recorded:{tmp_path}").recording_for(inst)


def test_a_track_of_another_length_than_recording_json_says_is_named(trials, tmp_path):
    inst, rec = trials["take_turn"]
    folder = save_recording(rec, tmp_path / inst.id, instance_id=inst.id)
    sf.write(str(folder / "output.flac"), np.zeros(len(rec.output) + 16_000, np.float32),
             16_000)
    with pytest.raises(RecordingFormatError, match=re.escape(
            f"{folder / 'output.flac'}: {len(rec.output) + 16_000} samples at 16000 Hz, but "
            f"recording.json field 'output_samples' says {len(rec.output)} at 16000 Hz")):
        load_recording(folder)
    meta = json.loads((folder / RECORDING_FILE).read_text())
    # a value with a line break (the longer fuzz campaign found it split the message)
    (folder / RECORDING_FILE).write_text(json.dumps({**meta, "input_samples": "lots\n0"}))
    with pytest.raises(RecordingFormatError, match="field 'input_samples' must be a number") \
            as refused:
        load_recording(folder)
    assert "\n" not in str(refused.value)


def test_a_folder_that_is_not_a_run_is_named_before_the_run(trials, tmp_path):
    from pytest_duplexact.models.providers.recorded import replay_problem

    (tmp_path / "notes.txt").write_text("not a run")
    why = replay_problem(tmp_path, {"a", "b"})
    assert why.startswith(f"{tmp_path} holds no recording of the 2 selected instance(s)")
    inst, rec = trials["take_turn"]
    save_recording(rec, tmp_path / "instances" / inst.id, instance_id=inst.id)
    assert replay_problem(tmp_path, {inst.id, "b"}) is None  # the rest: each its own error
