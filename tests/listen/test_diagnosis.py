"""A miss whose output sounded but held no speech says so (listen/diagnosis.py): a model
developer reading "no substantive model speech at all" next to 2.5 s of loud audio otherwise
suspects the benchmark, not the model's tone."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np

from pytest_duplexact.data.timeline import Timeline, Word
from pytest_duplexact.listen.diagnosis import no_speech_diagnosis, sound_seconds

SR = 16_000


def tone(seconds: float, db: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (10 ** (db / 20) * np.sqrt(2) * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def test_sound_seconds_counts_frames_above_minus_40_dbfs():
    x = np.concatenate([tone(1.0, -20), tone(1.0, -50), np.zeros(SR, np.float32)])
    assert abs(sound_seconds(x, SR) - 1.0) < 0.03


def test_the_diagnosis_names_sound_without_speech_and_stray_words():
    quiet = Timeline(segments=(), duration=3.0, speech=())
    assert no_speech_diagnosis(np.zeros(3 * SR, np.float32), SR, quiet) is None
    loud = no_speech_diagnosis(tone(2.5, -20), SR, quiet)
    assert "2.5 s of sound above -40 dBFS but no speech was detected" in loud
    stray = Timeline(segments=(), duration=3.0, speech=(),
                     unaligned=(Word(0.1, 0.4, "I"), Word(0.4, 0.8, "heard")))
    assert "2 native transcript word(s) fell in no speech segment" in \
        no_speech_diagnosis(np.zeros(3 * SR, np.float32), SR, stray)


BEEP = textwrap.dedent('''
    import numpy as np
    from pytest_duplexact.models.contract import StepOutput
    from pytest_duplexact.data.timeline import Word

    class Beep:
        """The docs' old example: a 440 Hz beep and native words, never speech."""
        name, sample_rate, frame_size = "beep", 16_000, 320

        def start(self, info):
            self.k = 0

        def step(self, frame):
            self.k += 1
            n = np.arange(self.frame_size) + self.k * self.frame_size
            out = (0.1 * np.sin(2 * np.pi * 440 * n / self.sample_rate)).astype(np.float32)
            words = [Word(0.0, 0.3, "hello")] if self.k % 50 == 0 else []
            return StepOutput(out, words)

        def finish(self):
            pass

    def factory(**options):
        return Beep()
''')


def test_a_beeping_model_is_told_its_tone_is_not_speech(pytester):
    pytester.makepyfile(beep_model=BEEP)
    res = pytester.runpytest_subprocess("--duplexact-model=beep_model:factory",
                                        "--duplexact-condition=take_turn.delayed",
                                        "--duplexact-limit=1", "--duplexact-transcriber=native",
                                        "--duplexact-run-dir=r", "-p", "no:cacheprovider",
                                        timeout=300)
    out = res.stdout.str()
    assert "of sound above -40 dBFS but no speech was detected" in out
    assert "native transcript word(s) fell in no speech segment" in out
    (inst,) = json.loads(Path(pytester.path, "r", "report.json").read_text())["instances"]
    assert "tones and noise are not speech" in inst["immediate"]["reason"]
