"""The online energy gate (activity.py) and pause squeezing."""

import numpy as np
import pytest

from pytest_duplexact.listen.activity import EnergyGate, speech_spans, squeeze_pauses
from tests.pipelines.helpers import SR, cat, gap, tone


def test_onset_and_offset_are_retroactive_and_confirmed_late():
    x = cat(gap(1.0), tone(1.0), gap(1.0))
    gate = EnergyGate(SR)
    changes = gate.feed(x[: int(1.02 * SR)])
    assert changes == [] and not gate.speaking  # one loud frame is not enough
    changes = gate.feed(x[int(1.02 * SR): int(1.04 * SR)])
    assert [(c.kind, c.time) for c in changes] == [("onset", pytest.approx(1.0))]
    changes = gate.feed(x[int(1.04 * SR):])
    assert [(c.kind, c.time) for c in changes] == [("offset", pytest.approx(2.0))]


def test_chunking_does_not_change_the_result():
    x = cat(gap(0.3), tone(0.5), gap(0.2), tone(0.7), gap(0.6), tone(0.4), gap(0.5))
    whole = speech_spans(x)
    gate, found, start = EnergyGate(SR), [], None
    rng = np.random.default_rng(1)
    i = 0
    while i < len(x):
        n = int(rng.integers(1, 900))
        for c in gate.feed(x[i: i + n]):
            if c.kind == "onset":
                start = c.time
            else:
                found.append((start, c.time))
        i += n
    assert found == whole == [(pytest.approx(0.3), pytest.approx(1.7)),
                              (pytest.approx(2.3), pytest.approx(2.7))]


def test_hysteresis_keeps_state_between_the_levels():
    x = cat(tone(0.5, level_db=-20), tone(1.0, level_db=-45), gap(0.5))
    assert speech_spans(x) == [(0.0, pytest.approx(1.5))]  # -45 dB neither starts nor ends
    assert speech_spans(tone(1.0, level_db=-45)) == []


def test_squeeze_pauses_shortens_long_pauses_and_moves_times():
    x = cat(tone(0.5), gap(0.6), tone(0.5), gap(0.1), tone(0.5))
    y, remap = squeeze_pauses(x, 0.2, 0.15)
    assert len(y) / SR == pytest.approx(len(x) / SR - 0.45, abs=0.021)
    sp = speech_spans(y, hangover_s=0.02)
    assert sp[1][0] - sp[0][1] == pytest.approx(0.15, abs=0.021)
    assert remap(0.2) == pytest.approx(0.2)
    assert remap(1.2) == pytest.approx(0.75, abs=0.021)  # second tone's start moved
    assert remap(2.0) == pytest.approx(1.55, abs=0.021)
