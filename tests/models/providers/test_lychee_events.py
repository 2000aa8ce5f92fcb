"""lychee-fd's event parser below the wall clock (models/lychee_fd.py ``_translate``): the
bounds on what the server chooses for audio (issue 32 item 3) and an ``error`` event's text
losing ``server_url``'s credentials (item 9). Each case is one event, no network."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.models.providers.lychee_fd import MAX_EVENT_S, LycheeSession
from pytest_duplexact.models.providers.lychee_fd import factory as lychee
from pytest_duplexact.models.streaming_contract import AudioDelta, Error

URL = "http://bob:s3cr%40t@127.0.0.1:7860"  # the password is "s3cr@t"


@pytest.fixture
def session():
    return LycheeSession(lychee(server_url=URL))


def pcm_event(samples: int, rate) -> str:
    pcm = np.zeros(samples, "<i2").tobytes()
    return json.dumps({"pcm_b64": base64.b64encode(pcm).decode(), "sample_rate": rate})


def wav_event(samples: int, rate: int, channels: int = 1) -> str:
    buf = io.BytesIO()
    sf.write(buf, np.zeros((samples, channels), np.float32), rate, format="WAV")
    return json.dumps({"wav_b64": base64.b64encode(buf.getvalue()).decode()})


def only_error(events) -> Error:
    assert [type(e) for e in events] == [Error], events
    (e,) = events
    assert e.fatal and not e.transient and e.code == "bad_audio"
    return e


@pytest.mark.parametrize("rate", [1, 7_999, 192_001, 10**9, "fast", 16_000.5])
def test_a_server_chosen_rate_outside_8_to_192_khz_is_a_model_error(session, rate):
    # 50 samples at 1 Hz would be 1.2 M samples once resampled; the 120 KB, 5.9 GB
    e = only_error(session._translate("audio_chunk_pcm", pcm_event(50, rate)))
    assert "outside 8000-192000 Hz" in e.message


def test_one_event_carries_at_most_max_event_s_of_audio(session):
    over = int((MAX_EVENT_S + 1) * 24_000)
    e = only_error(session._translate("audio_chunk_pcm", pcm_event(over, 24_000)))
    assert f"more than {MAX_EVENT_S:g} s" in e.message
    e = only_error(session._translate("audio_chunk", wav_event(over // 3, 8_000)))
    assert f"over {MAX_EVENT_S:g} s" in e.message
    e = only_error(session._translate("audio_chunk", wav_event(100, 4_000)))
    assert "outside 8000-192000 Hz" in e.message


def test_audio_within_the_bounds_plays_at_24_khz(session):
    (d,) = [e for e in session._translate("audio_chunk_pcm", pcm_event(8_000, 16_000))
            if isinstance(e, AudioDelta)]
    assert len(d.audio) == 12_000
    (d,) = [e for e in session._translate("audio_chunk", wav_event(4_800, 48_000, 2))
            if isinstance(e, AudioDelta)]
    assert len(d.audio) == 2_400


@pytest.mark.parametrize("echo", ["auth failed for http://bob:s3cr%40t@127.0.0.1:7860/x",
                                  "proxy said: password s3cr@t is wrong",
                                  "proxy said: password s3cr%40t is wrong"])
def test_an_error_event_loses_the_server_urls_credentials(session, echo):
    (e,) = session._translate("error", json.dumps({"error": echo}))
    assert e.fatal and e.transient
    assert "s3cr" not in e.message and "bob" not in e.message, e.message
    assert "***" in e.message or "<server_url password>" in e.message  # masked, either way


def test_text_sent_before_its_state_change_belongs_to_that_turn(session):
    """app.py pushes a round's assistant_text while it decodes and the round's state_change
    (from round_trace, capitals) at its end: the text, the change and the audio are one turn
    (before, the text's own turn was closed without audio and its words were lost)."""
    events = [*session._translate("assistant_text", json.dumps(
                  {"delta": "this", "snapshot": "this", "round_id": 6})),
              *session._translate("state_change", json.dumps({"from": "L", "to": "S"})),
              *session._translate("audio_chunk_pcm", pcm_event(2_400, 24_000))]
    assert [type(e).__name__ for e in events] == ["TranscriptDelta", "AudioDelta"]
    assert events[0].item_id == events[1].item_id
    more = session._translate("state_change", json.dumps({"from": "L", "to": "S"}))
    assert [type(e).__name__ for e in more] == ["ItemDone"]  # a heard turn: the next starts
