"""Unit and clock conversions of the mapping at their edges (released/mapping.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_duplexact.released.mapping import load_mapping, lookup, normalise, to_seconds


@given(st.floats(-1e9, 1e9, allow_nan=False))
def test_ms_and_samples_are_exact_scalings(v):
    assert to_seconds(v, "s") == v
    assert to_seconds(v, "ms") == v / 1000.0
    assert to_seconds(v, "samples", 24_000) == v / 24_000.0
    assert math.isclose(to_seconds(str(v), "ms"), v / 1000.0)


@given(st.integers(0, 10**7), st.sampled_from([8_000, 16_000, 22_050, 24_000, 44_100, 48_000]))
def test_sample_counts_round_trip(n, rate):
    assert round(to_seconds(n, "samples", rate) * rate) == n


@pytest.mark.parametrize("value", [True, False, None, "", "abc", float("nan"), float("inf"),
                                   -float("inf"), "nan", [], {}, 10**400])
def test_non_numbers_are_refused(value):
    with pytest.raises(ValueError):
        to_seconds(value, "s")


@pytest.mark.parametrize("rate", [None, 0, -16000])
def test_samples_need_a_positive_rate(rate):
    with pytest.raises(ValueError, match="positive sample rate"):
        to_seconds(100, "samples", rate)


def test_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit 'frames'"):
        to_seconds(1, "frames")


def test_dotted_lookup_and_literal_keys():
    meta = {"a": {"b": 1}, "a.b": 2, "c": {"d": {"e": 3}}}
    assert lookup(meta, "a.b") == 2  # a literal key wins
    assert lookup(meta, "c.d.e") == 3
    with pytest.raises(KeyError):
        lookup(meta, "c.x")


def test_list_indices_in_mapping_keys():
    """Issue 32 item 15: metadata that stores an interval as a list can be placed."""
    meta = {"pause_interval_sec": [1.2, 2.0], "turns": [{"start_ms": 5}, {"start_ms": 9}],
            "grid": [[0, 1], [2, 3]], "odd[0]": "literal", "t": {"x[1]": "nested literal"}}
    assert lookup(meta, "pause_interval_sec[0]") == 1.2
    assert lookup(meta, "pause_interval_sec[1]") == 2.0
    assert lookup(meta, "turns[1].start_ms") == 9
    assert lookup(meta, "grid[1][0]") == 2
    assert lookup(meta, "odd[0]") == "literal"  # a key spelt with its brackets wins
    assert lookup(meta, "t.x[1]") == "nested literal"
    for absent in ("pause_interval_sec[2]", "pause_interval_sec[-1]", "turns[0].end_ms",
                   "turns.start_ms", "grid[0][5]", "t[0]", "pause_interval_sec[x]",
                   "pause_interval_sec[99999999999999999999]"):
        with pytest.raises(KeyError):
            lookup(meta, absent)


def test_condition_and_scenario_spellings():
    m = load_mapping()
    assert m.condition("wait", "Inter-Sentential Pause") == "inter_sentential_pause"
    assert m.condition("wait", "no pause") == "continuous_speech"
    assert m.condition("take_turn", "take_turn.slight-overlap") == "slight_overlap"
    assert m.condition("take_turn", "eventually") is None
    assert m.condition("wait", None) is None
    assert m.scenario("Customer Service") == "customer_service"
    assert m.scenario("podcast") is None
    assert m.corpus("ami") == "AMI" and m.source_of("AMI") == "real"


def test_user_mapping_extends_and_errors_name_the_field(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('[conditions.wait]\n"long pause" = "inter_sentential_pause"\n')
    m = load_mapping(f)
    assert m.condition("wait", "Long Pause") == "inter_sentential_pause"
    assert m.condition("wait", "intra") == "intra_sentential_pause"  # bundled entry kept
    f.write_text('[annotations]\nuser_start = [{ key = "t", unit = "minutes" }]\n')
    with pytest.raises(Exception, match=r"annotations.user_start\[0\].unit': unknown unit"):
        load_mapping(f)
    f.write_text('[configs]\nwait = "pause"\n')
    with pytest.raises(Exception, match="field 'configs.wait': unknown action 'pause'"):
        load_mapping(f)


def test_clocks_origin_and_source_rate(tmp_path):
    """A value measured from another metadata key (origin) is moved onto the clip's clock;
    samples use the rate of the clip the annotation is on (user vs cue)."""
    from pytest_duplexact.released.convert import map_annotations, map_fields

    f = tmp_path / "m.toml"
    f.write_text('''
[annotations]
user_start = [{ key = "seg.start_ms", unit = "ms", origin = "seg.clip_ms" }]
user_end = [{ key = "seg.end_ms", unit = "ms", origin = "seg.clip_ms" }]
other_start = [{ key = "o0", unit = "samples", rate = "source" }]
other_end = [{ key = "o1", unit = "samples", rate = 8000 }]
cue_start = [{ key = "c0", unit = "samples", rate = "source" }]
[text]
user = ["u"]
ignored = ["i"]
''')
    m = load_mapping(f)
    meta = {"seg": {"start_ms": 61_250, "end_ms": 64_000, "clip_ms": 60_000},
            "o0": 48_000, "o1": 16_000, "c0": 24_000, "u": "a b", "i": "b"}
    r = map_fields(m, "ignore", 3, {"condition": "Background", "dataset": "AMI",
                                    "metadata": __import__("json").dumps(meta)})
    assert (r.condition, r.corpus, r.source, r.scenario, r.iid) == \
        ("background_speech", "AMI", "real", "unspecified", "ignore-00003")
    values, problems = map_annotations(m, r, "ignore", {"user": 48_000, "cue": 24_000})
    assert problems == {}
    assert values["user_start"] == pytest.approx(1.25)
    assert values["user_end"] == pytest.approx(4.0)
    assert values["other_start"] == 1.0  # 48000 samples at the user clip's 48 kHz
    assert values["other_end"] == 2.0  # a fixed 8 kHz rate
    assert values["cue_start"] == 1.0  # the cue clip's own 24 kHz
    meta["seg"]["end_ms"] = "late"
    r = map_fields(m, "ignore", 3, {"condition": "background", "dataset": "AMI",
                                    "metadata": __import__("json").dumps(meta)})
    _, problems = map_annotations(m, r, "ignore", {"user": 48_000})
    assert problems == {"annotations.user_end": "metadata 'seg.end_ms': not a number: 'late'"}


@pytest.mark.parametrize("raw", ["Customer Service", "customer-service", " CUSTOMER_service "])
def test_normalise_spelling(raw):
    assert normalise(raw) == "customer_service"
