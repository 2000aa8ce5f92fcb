"""A model that beeps does not take turns (issue 31, friction): the VAD's failure message says
"tones and noise are not speech", yet silero scores some tones as speech (a tone modulated at a
syllable rate in full, a 220 Hz sine's onset), and with the model's own words attached those
spans passed take_turn. Tones are now dropped from the speech spans (listen/vad.py is_tone).

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import re
import textwrap

from tests.support.inner_runs import as_user

inproc = as_user()

TONE_MODEL = textwrap.dedent('''
    import numpy as np
    from pytest_duplexact.data.timeline import Word
    from pytest_duplexact.models.providers.endpoint import EndpointModel
    from pytest_duplexact.models.util.playback import Speech

    class Beeper(EndpointModel):
        """The endpoint's turn-taking, answering with a 220 Hz tone at a syllable rate (and
        its words, as a bridge's TEXT would give them) instead of speech."""

        name = "beeper"

        def start(self, info):
            super().start(info)
            t = np.arange(2 * 16_000) / 16_000
            tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
            words = [Word(0.1 + 0.3 * i, 0.35 + 0.3 * i, w)
                     for i, w in enumerate("sure thing here is my answer".split())]
            self.reply = Speech.of(tone.astype(np.float32), words)

    def factory(**options):
        return Beeper(**options)
''')


def test_a_beeping_model_passes_no_take_turn_instance(pytester):
    pytester.makepyfile(beeper=TONE_MODEL)
    res = inproc(pytester, "--duplexact-model=beeper:factory",
                 "--duplexact-action=take_turn", "-p",
                 "no:cacheprovider", "-q")
    res.assert_outcomes(failed=9)
    out = res.stdout.str()
    # the failures' own sections (pytest's short summary repeats them untruncated under CI=true)
    reasons = [m[1] for line in out.splitlines() if not line.startswith("FAILED ")
               for m in [re.search(r"immediate execution failed: (.*)", line)] if m]
    assert len(reasons) == 9, out
    assert all(r.startswith("no substantive model speech at all") and
               "no speech was detected (tones and noise are not speech)" in r
               for r in reasons), reasons
