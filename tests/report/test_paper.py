"""The bundled transcription of the paper's Tables 4, 15 and 16 (data/paper_results.json):
shapes, spot checks against the printed tables, and the tables' internal consistency."""

from __future__ import annotations

import pytest

from pytest_duplexact.data import paper, taxonomy


@pytest.fixture(scope="module")
def pr():
    return paper.load()


def test_shapes(pr):
    assert len(pr.models) == 14
    assert sum(m.simulator for m in pr.models) == 10
    assert [m.name for m in pr.models if m.access == "closed"] == [
        "Gemini 3.1 Flash Live", "GPT-Realtime-2.1", "Grok Voice", "Qwen3.5-Omni-Flash-Realtime"]
    for m in pr.models:
        acts = pr.table4[m.name]
        assert len(acts) == (8 if m.simulator else 4)
        assert len(pr.table16[m.name]) == (24 if m.simulator else 10)
        assert (m.name in pr.table15) == m.simulator
    assert pr.instances == 4691
    assert "4,691" in pr.note


@pytest.mark.parametrize("model,action,expected", [
    ("GPT-Realtime-2.1", "wait", {"I": 0.998, "S": 0.957, "T": None}),
    ("Moshi", "stop", {"I": 0.980, "S": 0.707, "T": 0.96}),
    ("Moshi", "interrupt", {"I": 0.675, "S": 0.0, "T": -3.97}),
    ("Grok Voice", "interrupt", {"I": 0.0, "S": None, "T": None}),  # n/a stays null
    ("Mini-Omni2", "backchannel", {"I": 0.0, "S": None, "T": None}),
    ("Qwen3.5-Omni-Flash-Realtime", "recover", {"I": 0.913, "S": 0.849, "T": 2.68}),
])
def test_table4_spot_checks(pr, model, action, expected):
    got = pr.action(model, action)
    for k, v in expected.items():
        assert got[k] == (None if v is None else pytest.approx(v)), (model, action, k)


def test_table4_models_without_simulator_have_no_simulator_cells(pr):
    assert pr.action("Mini-Omni2", "stop") is None
    assert pr.action("Lychee-FD", "wait") is not None


@pytest.mark.parametrize("model,key,expected", [
    ("Moshi", "take_turn.delayed", (0.530, 0.104, 106)),
    ("Moshi", "wait.inter_sentential_pause", (0.815, 0.423, 163)),
    ("Freeze-Omni", "backchannel.uncertainty", (0.0, None, 0)),
    ("GPT-Realtime-2.1", "hold_floor.shorten", (0.892, 0.0, 99)),
    ("Qwen3.5-Omni-Flash-Realtime", "interrupt.safety", (0.005, 0.0, 1)),
    ("Gemini 3.1 Flash Live", "recover.revise", (0.979, 0.827, 185)),
])
def test_table16_spot_checks(pr, model, key, expected):
    c = pr.condition(model, key)
    i, s, n_s = expected
    assert c["I"] == pytest.approx(i)
    assert c["S"] == (None if s is None else pytest.approx(s))
    assert c["n_S"] == n_s


def test_table15_spot_checks(pr):
    assert pr.timing("Moshi", "stop.direct_interruption") == {"median": 0.96, "iqr": 1.97,
                                                               "n": 96}
    assert pr.timing("Gemini 3.1 Flash Live", "interrupt.safety") is None
    assert pr.timing("Qwen3.5-Omni-Flash-Realtime", "interrupt.safety") == {
        "median": 0.09, "iqr": None, "n": 1}
    assert pr.timing("Freeze-Omni", "recover.wrap_up")["median"] == -1.83


def test_table4_S_is_table16_pooled(pr):
    """Table 4's S is micro-averaged: sum(S * n_S) / sum(n_S) over the action's Table 16
    cells, within the printing's rounding (each S cell and the total to 0.05 points).
    Checks every transcribed S cell at once."""
    for m in pr.models:
        for action in pr.table4[m.name]:
            cells = [pr.table16[m.name][c.key] for c in taxonomy.conditions_of(action)]
            n = sum(c["n_S"] for c in cells)
            printed = pr.table4[m.name][action]["S"]
            if n == 0:
                assert printed is None, (m.name, action)
                continue
            pooled = sum(c["S"] * c["n_S"] for c in cells if c["n_S"]) / n
            assert pooled == pytest.approx(printed, abs=0.1), (m.name, action)


def test_table4_I_is_table16_mean_for_direct_actions(pr):
    """Direct Replay conditions have equal n (no exclusions): Table 4's I is their mean."""
    for m in pr.models:
        for action in paper.DIRECT_ACTIONS:
            cells = [pr.table16[m.name][c.key]["I"] for c in taxonomy.conditions_of(action)]
            assert sum(cells) / len(cells) == pytest.approx(
                pr.table4[m.name][action]["I"], abs=0.06), (m.name, action)


@pytest.mark.parametrize("key,i,s", [  # the values printed on the paper's Figure 3
    ("ignore.background_speech", 76.4, 82.9),
    ("take_turn.immediate", 8.0, 23.7),
    ("take_turn.delayed", 60.9, 34.0),
    ("hold_floor.continue", 90.5, 73.3),
    ("hold_floor.shorten", 85.4, 4.5),
    ("interrupt.safety", 12.2, 2.4),
    ("recover.wrap_up", 49.3, 45.1),
])
def test_condition_mean_reproduces_figure_3(pr, key, i, s):
    mi, ms = pr.condition_mean(key)
    assert 100 * mi == pytest.approx(i, abs=0.06)
    assert 100 * ms == pytest.approx(s, abs=0.06)


def test_bad_bundled_data_names_the_field(monkeypatch):
    import json

    d = json.loads(paper.files(paper.__package__).joinpath(paper.RESOURCE).read_text())
    del d["table16"]["Moshi"]["take_turn.delayed"]
    with pytest.raises(paper.PaperDataError, match=r"table16\.Moshi.*take_turn\.delayed"):
        paper._validate(d)
