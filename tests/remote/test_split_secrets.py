"""A secret a server splits across streamed text pieces is masked in the joined text, however
it is split (issue 32: each piece was scrubbed alone, so none held the whole key)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_duplexact.models.util.words import TextStream
from pytest_duplexact.pipelines.streaming_duplex import PlaybackBuffer
from pytest_duplexact.remote import netsafety
from pytest_duplexact.remote.netsafety import ReceivedText, scrub_received

KEY_ENV = "DUPLEXACT_BRIDGE_API_KEY"
KEY = "bk-LEAKCHECK-0123456789abcdef"
PASSWORD = "hunter2-pass"  # a server_url password: configured, not named like a key
WORDS = st.text(st.sampled_from("abc xyz.,\n"), max_size=40)


@pytest.fixture(autouse=True, scope="module")
def secrets():
    """The bridge key in the environment and a password the user configured (set once: the
    hypothesis tests run many examples per call)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        mp.setattr(netsafety, "_CONFIGURED", {PASSWORD: "server_url password"})
        yield


def pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def joined(parts: list[str], hold: int = ReceivedText.HOLD) -> str:
    text = ReceivedText(hold=hold)
    for part in parts:
        text.add(part)
        assert KEY not in text.text and PASSWORD not in text.text  # at every point
    return text.text


@settings(max_examples=300, deadline=None)
@given(before=WORDS, after=WORDS, cuts=st.lists(st.integers(0, 10_000), max_size=12),
       secret=st.sampled_from([KEY, PASSWORD, f"Bearer {KEY}"]),
       filler=st.integers(0, 3), hold=st.sampled_from([1, 64, ReceivedText.HOLD]))
def test_a_secret_split_anywhere_is_masked_in_the_joined_text(before, after, cuts, secret,
                                                              filler, hold):
    whole = "ok " * 400 * filler + before + " " + secret + " " + after
    text = joined(pieces(whole, cuts), hold)
    assert text == scrub_received(whole)  # as if the server had sent it in one piece
    assert KEY not in text and PASSWORD not in text


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_ordinary_text_is_joined_exactly(text, cuts):
    if scrub_received(text) == text:  # nothing a scrub masks, however it is split
        assert joined(pieces(text, cuts), hold=8) == text


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), min_size=2, max_size=10))
def test_a_key_split_across_frames_becomes_one_masked_word_with_its_times(cuts):
    """A stepped bridge's TEXT per frame: the word assembled from 3+ frames is scrubbed whole;
    every word keeps the times it had unscrubbed."""
    whole = f" my key is {KEY} ok "
    parts = pieces(whole, cuts)
    stream, plain = TextStream(0.08), TextStream(0.08)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("pytest_duplexact.models.util.words.scrub_received", lambda t: t)
        unmasked = [w for k, p in enumerate(parts) for w in plain.feed_text(k, p)]
    words = [w for k, p in enumerate(parts) for w in stream.feed_text(k, p)]
    assert [(w.start, w.end) for w in words] == [(w.start, w.end) for w in unmasked]
    assert [w.text for w in words] == ["my", "key", "is", f"<{KEY_ENV}>", "ok"]


def test_a_key_split_across_transcript_deltas_never_reaches_the_words():
    """The streaming path: deltas joined by the playback buffer, words placed on its audio."""
    buf = PlaybackBuffer(24_000)
    for part in [" my key is bk-LE", "AKCHECK-01234", "56789", "abcdef ok"]:
        buf.add_text("a", part)
    buf.add_audio(0.0, "a", np.zeros(24_000, np.float32))
    buf.finish("a")
    words = [w.text for w in buf.words(2.0)]
    assert words == ["my", "key", "is", f"<{KEY_ENV}>", "ok"]


def test_a_configured_key_and_password_are_masked_under_any_name(monkeypatch):
    """A bridge key under a name no pattern knows, and a server_url password: every scrub
    masks them once the model is configured (the playback buffer knows neither name)."""
    from pytest_duplexact.models.model_options import check_server_url, check_transport

    monkeypatch.setattr(netsafety, "_CONFIGURED", {})
    monkeypatch.setenv("MY_BRIDGE_PASS", "opaque-value-42")
    check_transport("bridge", "ws://127.0.0.1:9/", key_env="MY_BRIDGE_PASS", carries_key=True,
                    allow_insecure=False)
    check_server_url("lychee-fd", "http://bob:s3cr%40t-pw@127.0.0.1:7860", "http://HOST:7860")
    text = ReceivedText()
    for part in ["opaque-", "value-42 and s3cr", "@t-pw ok"]:
        text.add(part)
    assert text.text == "<MY_BRIDGE_PASS> and <server_url password> ok"
