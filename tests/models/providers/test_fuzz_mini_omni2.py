"""Fuzzing mini-omni2's reply parser (models/mini_omni2.py ``MultipartReader``, issue 32
"What to build" 2): any reply body, cut into any chunks as the network delivers it, gives the
same parts as the whole body would, or a model error; never another exception, and the
reader never holds more than its bound plus one chunk (memory).

Needs issue 32's mini-omni2 bound (item 10, ``MAX_PART_BYTES``); skipped on a tree without
it."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_duplexact.models.contract import ModelError
from pytest_duplexact.models.providers import mini_omni2

if not hasattr(mini_omni2, "MAX_PART_BYTES"):
    pytest.skip("mini-omni2's bounded reply parser (issue 32 item 10) is not in this tree",
                allow_module_level=True)

EXAMPLES = int(os.environ.get("DUPLEXACT_FUZZ_EXAMPLES", "200"))
B = mini_omni2.BOUNDARY
MAX = 4096  # a small bound, so examples reach it

headers = st.sampled_from([b"Content-Type: audio/pcm\r\n\r\n", b"Content-Type: text/plain\r\n\r\n",
                           b"content-type:TEXT/X\r\n\r\n", b"X: y\r\n\r\n", b"no header",
                           b"\r\n\r\n", b""])
bodies = st.binary(max_size=64) | st.sampled_from([b"\r\n--frame", b"--frame\r\n", b"\r\n",
                                                   b"x" * (MAX + 10)])
parts = st.lists(st.tuples(headers, bodies).map(lambda t: t[0] + t[1]), max_size=5)


@st.composite
def replies(draw) -> tuple[bytes, list[int]]:
    lead = draw(st.sampled_from([B, b"", b"junk" + B]))
    body = lead + B.join(draw(parts))
    if draw(st.booleans()):
        body += draw(st.binary(max_size=32))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=8)))
    return body, cuts


def _read(chunks: list[bytes]) -> list | type:
    reader = mini_omni2.MultipartReader(max_part_bytes=MAX)
    out: list = []
    try:
        for chunk in chunks:
            out += reader.feed(chunk)
            assert len(reader._buf) <= MAX + len(chunk)  # never more than the bound + a chunk
        out += reader.flush()
    except ModelError:
        return ModelError
    return out


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(replies())
def test_any_reply_in_any_chunks_parses_as_the_whole_or_is_a_model_error(reply):
    body, cuts = reply
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    whole = _read([body])
    if whole is ModelError:
        return  # in chunks it may fail sooner or (a boundary found early) parse: both are fine
    # a reply the whole body parses is parsed the same however it arrives, unless a chunk
    # ran past the bound before its boundary came
    got = _read(chunks)
    assert got == whole or got is ModelError, (got, whole)
    for kind, data in whole:
        assert isinstance(kind, str) and isinstance(data, bytes)
