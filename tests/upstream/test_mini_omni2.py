"""Mini-Omni2: the authors' own ``server.py`` (gpt-omni/mini-omni2: Flask, ``POST /chat``,
the multipart reply, ``threaded=False``) started with the command docs/models.md prints, only
its networks stubbed (tests/upstream/stubs/mini_omni2: ``OmniVisionInference``, which holds
the LLM, whisper and SNAC), and our real ``mini-omni2`` adapter driven against it.

Environment ($DUPLEXACT_UPSTREAM_DIR/gpt-omni+mini-omni2.venv, Python 3.11)::

    pip install flask==3.0.3 fire "numpy<2"

(the README's torch, litgpt, whisper and snac serve only the stubbed networks.)
"""

from __future__ import annotations

import asyncio
import statistics

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.providers.mini_omni2 import factory as mini_omni2
from pytest_duplexact.models.providers.mini_omni2 import speech_seconds
from tests.fakes.fake_ws import energy_bounds
from tests.support.realtime import run_trial
from tests.upstream import support

REPO = "gpt-omni/mini-omni2"
STUBS = [support.STUBS / "mini_omni2", support.STUBS / "common"]
SENTENCE = "Yes, I hear you, and this is the stub's fixed answer."  # stubs/common


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ck = support.checkout(REPO)
    d = tmp_path_factory.mktemp("mini-omni2")
    port = support.free_port()
    command = (support.printed_command("mini-omni2")
               .replace("--ip 0.0.0.0", "--ip 127.0.0.1").replace("--port 60808", f"--port {port}"))
    tree = support.run_tree(ck, d / "run")
    log = d / "stub.jsonl"
    (d / "tmp").mkdir()
    with support.Server(ck, command, tree, STUBS, d / "server.log",
                        env={"DUPLEXACT_STUB_LOG": str(log), "TMPDIR": str(d / "tmp")}) as srv:
        srv.wait_port(port)
        yield ck, port, log, srv


def test_the_adapter_against_the_authors_server(server):
    """Reach (its 405), two turns in two sessions one after the other (the server answers one
    request at a time), the audio at the stub's answer, the text parts as the transcript; the
    measured row."""
    ck, port, log, srv = server
    url = f"http://127.0.0.1:{port}"
    assert "HTTP 405 on GET /chat" in mini_omni2.reach(server_url=url)
    speech_seconds(np.zeros(9600, np.float32))  # the client's VAD network, loaded first

    async def turn():
        x = support.user_turns((0.3,), 5.0)
        before = len(support.stub_events(log, "answer"))
        rec, _, t0, session = await run_trial(mini_omni2(server_url=url), x)
        [decided] = support.stub_events(log, "answer")[before:]
        a = int((decided - t0) * SAMPLE_RATE)
        bounds = energy_bounds(rec.output[a:], SAMPLE_RATE)
        assert bounds is not None, srv.tail()
        assert " ".join(w.text for w in rec.transcript) == SENTENCE
        assert session.usage["audio_out_s"] == pytest.approx(1.0, abs=0.01)
        return bounds[0]

    onsets = [asyncio.run(turn()) for _ in range(2)]  # a fresh session each: end of session
    assert asyncio.run(one_at_a_time(url)), "two requests were answered at once"
    support.record_row(
        "mini-omni2", ck, connects=True, audio=True, text=True, barge_in_stop=None,
        onset_err_ms_median=round(1000 * statistics.median(onsets)),
        onset_err_ms_max=round(1000 * max(onsets)), sessions=1,
        notes="turn-based: no barge-in; two requests at once answered one after the other "
              "(threaded=False; the adapter's max_concurrency)")


async def one_at_a_time(url: str) -> bool:
    """Two turns posted at once: the second reply's first byte comes after the first reply
    ended (Flask threaded=False), which is why the adapter runs one instance at a time."""
    import base64
    import json
    import time

    from pytest_duplexact.models.util.http_server import client, wav_bytes

    body = json.dumps({"audio": base64.b64encode(wav_bytes(support.user_turns((0.0,), 1.5)))
                       .decode("ascii"), "stream_stride": 4, "max_tokens": 2048})

    async def post(http):
        first = last = None
        async with http.stream("POST", url + "/chat", content=body,
                                 headers={"Content-Type": "application/json"}) as r:
            async for _ in r.aiter_bytes():
                first = first or time.monotonic()
                last = time.monotonic()
        return first, last

    async with client(verify=True, connect_timeout=20, read_timeout=60) as http:
        (f1, l1), (f2, l2) = await asyncio.gather(post(http), post(http))
    return f2 >= l1 or f1 >= l2
