"""Channels (pipelines/channel.py): the spec, and each stage's properties as a pure function;
the stepped and streaming sessions heard through one (pipelines/channelled.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines import channel as ch
from pytest_duplexact.pipelines.channelled import ChannelledDuplex, echo_problem
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, ScriptedModel, cat, direct_instance, gap, run, tone

FAST = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def speechlike(seed: int, seconds: float = 2.0) -> np.ndarray:
    """Tone bursts with pauses at varied levels: active speech and silence, as a user's."""
    rng = np.random.default_rng(seed)
    parts = [gap(0.3)]
    while sum(map(len, parts)) < seconds * SR:
        parts += [tone(float(rng.uniform(0.2, 0.6)), float(rng.uniform(150, 800)),
                       float(rng.uniform(-30, -18))), gap(float(rng.uniform(0.1, 0.4)))]
    return cat(*parts)


# --- the spec -------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, canonical", [
    ("clean", "clean"), ("", "clean"), ("phone", "phone"), ("noise:Pink@10.0", "noise:pink@10"),
    (" phone + noise:babble@10 ", "phone+noise:babble@10"), ("room:0.50", "room:0.5"),
    ("echo:-6@50", "echo:-6@50"), ("room:0.3+echo:-12@120+phone", "room:0.3+echo:-12@120+phone"),
])
def test_spec_canonical(spec, canonical):
    assert ch.parse(spec).spec == canonical
    assert ch.parse(canonical).spec == canonical


@pytest.mark.parametrize("spec, says", [
    ("phon", "did you mean 'phone'"), ("noise:babel@10", "did you mean 'babble'"),
    ("noise:white", "noise:KIND@SNR"), ("echo:-6", "echo:LEVEL_DB@DELAY_MS"),
    ("room:9", "from 0.05 to 3"), ("echo:-6@nan", "the delay (ms)"), ("phone+", "empty stage"),
    ("phone:1", "takes no parameter"),
])
def test_bad_spec_is_one_line(spec, says):
    with pytest.raises(ch.ChannelError) as e:
        ch.parse(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("spec, says", [
    # it said "unknown stage 'clean' (did you mean 'clean'?)"
    ("clean+phone", "channel 'clean+phone': 'clean' stands alone (it is no stage): leave it "
                    "out, e.g. 'phone'"),
    ("phone+Clean+noise:pink@10", "leave it out, e.g. 'phone+noise:pink@10'"),
    ("clean+clean", "write clean alone, or leave the option out"),
    ("clean:3", "write clean alone"),
])
def test_clean_is_no_stage(spec, says):
    with pytest.raises(ch.ChannelError) as e:
        ch.parse(spec)
    assert says in str(e.value) and "did you mean" not in str(e.value)


def test_a_stage_misspelt_beside_others_is_not_offered_clean():
    with pytest.raises(ch.ChannelError) as e:
        ch.parse("clen+phone")
    assert "unknown stage 'clen'" in str(e.value) and "did you mean 'clean'" not in str(e.value)
    with pytest.raises(ch.ChannelError, match="did you mean 'clean'"):
        ch.parse("clen")  # alone, it is what was meant


# --- the stages as pure functions ------------------------------------------------------------

@FAST
@given(kind=st.sampled_from(ch.NOISE_KINDS), snr=st.floats(-5, 30), seed=st.integers(0, 2**31),
       speech_seed=st.integers(0, 1000))
def test_noise_snr_against_active_speech(kind, snr, seed, speech_seed):
    x = speechlike(speech_seed)
    y = ch.apply(f"noise:{kind}@{snr}", x, seed=seed)
    noise = y.astype(np.float64) - x
    # over the frames where the user speaks (the P.56-like active frames)
    n = int(ch.ACTIVE_FRAME_S * SR)
    k = len(x) // n
    power = np.mean(x[: k * n].reshape(k, n).astype(np.float64) ** 2, axis=1)
    active = power >= power.max() * 10 ** (-ch.ACTIVE_RANGE_DB / 10)
    speech_p = power[active].mean()
    noise_p = np.mean(noise[: k * n].reshape(k, n) ** 2, axis=1)[active].mean()
    assert 10 * np.log10(speech_p / noise_p) == pytest.approx(snr, abs=0.5)


def test_active_level_ignores_pauses():
    x = tone(1.0, level_db=-20)
    assert ch.active_level(cat(x, gap(3.0))) == pytest.approx(ch.active_level(x), rel=0.01)


def _gain_db(y: np.ndarray, freq: float, amp: float) -> float:
    """The level of ``freq`` in ``y`` (its Fourier coefficient over the settled middle)."""
    mid = y[SR // 4: -SR // 4].astype(np.float64)
    t = np.arange(len(mid)) / SR
    c = 2 * np.abs(np.mean(mid * np.exp(-2j * np.pi * freq * t)))
    return 20 * np.log10(max(c, 1e-9) / amp)


@FAST
@given(freq=st.one_of(st.floats(40, 150), st.floats(4200, 7800)))
def test_phone_attenuates_outside_the_band(freq):
    t = np.arange(SR) / SR
    x = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    assert _gain_db(ch.apply("phone", x), freq, 0.3) < -20


@FAST
@given(freq=st.floats(500, 3000))
def test_phone_passes_the_band(freq):
    t = np.arange(SR) / SR
    x = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    assert _gain_db(ch.apply("phone", x), freq, 0.3) == pytest.approx(0, abs=1.0)


def test_room_decays_at_its_rt60():
    for rt60 in (0.3, 0.8):
        h = ch.room_response(rt60, seed=3)
        tail = h[int(0.03 * SR):]  # after the direct path and the early reflections
        edc = np.cumsum((tail ** 2)[::-1])[::-1]  # Schroeder's backward integral
        db = 10 * np.log10(edc / edc[0])
        i5, i25 = np.argmax(db <= -5), np.argmax(db <= -25)
        measured = 3 * (i25 - i5) / SR  # T20, extrapolated to 60 dB
        assert measured == pytest.approx(rt60, rel=0.1)
        assert np.sum(h ** 2) == pytest.approx(1.0)


@FAST
@given(level=st.floats(-30, 0), delay_ms=st.floats(0, 300), seed=st.integers(0, 100))
def test_echo_lands_at_its_delay(level, delay_ms, seed):
    played = np.random.default_rng(seed).standard_normal(SR).astype(np.float32) * 0.1
    y = ch.apply(f"echo:{level}@{delay_ms}", np.zeros(SR, np.float32), played=played)
    d = int(round(delay_ms * SR / 1000))
    expect = np.zeros(SR)
    expect[d:] = 10 ** (level / 20) * played[: SR - d]
    np.testing.assert_allclose(y, expect, atol=1e-6)


@FAST
@given(spec=st.sampled_from(["noise:white@5", "noise:pink@0", "noise:babble@10", "noise:cafe@3",
                             "phone", "room:0.4", "phone+noise:babble@10+room:0.2"]),
       seed=st.integers(0, 2**31), cuts=st.lists(st.integers(1, 4000), max_size=6))
def test_same_seed_same_bytes_in_any_pieces(spec, seed, cuts):
    x = speechlike(7, 1.0)
    whole = ch.apply(spec, x, seed=seed)
    assert whole.tobytes() == ch.apply(spec, x, seed=seed).tobytes()
    chain = ch.parse(spec).open(seed, ch.active_level(x))
    edges = sorted({0, len(x), *(c for c in np.cumsum(cuts) if c < len(x))})
    pieces = [chain.process(x[a:b]) for a, b in zip(edges, edges[1:])]
    np.testing.assert_allclose(np.concatenate(pieces), whole, atol=1e-6)


def test_other_seed_other_noise():
    x = speechlike(1, 1.0)
    assert not np.array_equal(ch.apply("noise:white@10", x, seed=1),
                              ch.apply("noise:white@10", x, seed=2))


# --- in a session -----------------------------------------------------------------------------

def _direct(tmp_path, spec, model):
    inst = direct_instance(tmp_path, "take_turn", "continuous_speech")
    info = SessionInfo(inst, seed=5)
    duplex = ChannelledDuplex(SteppedDuplex(model, info), ch.parse(spec), info)
    return inst, run(DirectReplay().run(duplex, inst))


@pytest.mark.parametrize("frame", [320, 1280])
def test_stepped_echo_is_sample_exact(tmp_path, frame):
    model = ScriptedModel([(1.0, 2.5), (4.2, 5.0)], frame_size=frame)
    inst, rec = _direct(tmp_path, "echo:-6@100", model)
    user = inst.clip("user").load()
    np.testing.assert_array_equal(rec.input[: len(user)], user)  # the clean track kept
    d = int(0.1 * SR)
    expect = rec.input.astype(np.float64)
    expect[d:] += 10 ** (-6 / 20) * rec.output[:-d]
    np.testing.assert_allclose(rec.channel_input, np.clip(expect, -1, 1), atol=1e-6)


def test_stepped_echo_shorter_than_a_frame_is_refused(tmp_path):
    model = ScriptedModel(frame_size=1280)  # 80 ms
    assert "at least 80 ms" in echo_problem(ch.parse("echo:-6@50"), model)
    assert echo_problem(ch.parse("echo:-6@80"), model) is None
    assert echo_problem(ch.parse("phone"), model) is None


def test_channelled_session_equals_the_pure_function(tmp_path):
    model = ScriptedModel([(1.0, 2.0)])
    inst, rec = _direct(tmp_path, "phone+noise:pink@10", model)
    seed = ch.trial_seed(5, inst.id)
    expect = ch.apply("phone+noise:pink@10", rec.input, seed=seed,
                      speech=ch.speech_level(inst))
    np.testing.assert_array_equal(rec.channel_input, expect)
