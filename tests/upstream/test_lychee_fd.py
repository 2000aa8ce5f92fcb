"""``lychee-fd`` (models/lychee_fd.py, the real client) against the authors' own server:
HITsz-TMG/Lychee-FD's ``lychee_fd/app.py`` started with the command docs/models.md prints (a
free port, on 127.0.0.1), with the environment of the authors' ``scripts/start_backend.sh``
(vLLM backend, decoder flush 1, vocoder hop 25, lookahead 3) and its Token2Wav sidecar remote.

What runs is theirs: app.py whole (Gradio and FastAPI, the realtime routes, the session worker
and its inference rounds, ``run_chunk_dialogue_inference``, the TTS bridge ``RealtimeTTSPool``
and its ``RemoteToken2WavClient``, the server-sent events), and their ``StreamingDecoder`` (read
from ``lychee_fd/runtime/vllm_generation.py``). What is ours (tests/upstream/stubs/, and
lychee_sidecar.py): the generator, i.e. the model (``stubs/lychee``, served in place of
``lychee_fd.runtime.vllm_generation``: ``stubs/duplexact_turns.py`` answers 0.5 s after the user
stops with a 1 s voice-like tone and a fixed sentence, and stops when the user barges in), and
the Token2Wav sidecar (the vocoder: speech tokens to that tone's PCM).

Its environment, ``$DUPLEXACT_UPSTREAM_DIR/HITsz-TMG+Lychee-FD.venv``::

    python3.11 -m venv HITsz-TMG+Lychee-FD.venv
    HITsz-TMG+Lychee-FD.venv/bin/pip install gradio==6.9.0 librosa==0.11.0 soundfile \\
        torch==2.13.0

(the pins of its ``requirements.txt`` that app.py imports; vLLM, transformers and the model
stacks stay out: they are the stubbed generator's). Streaming at 1x: about 25 s in all.
"""

from __future__ import annotations

import asyncio

import pytest

from pytest_duplexact.models import resolve_model
from tests.upstream.duplex_checks import (
    SENTENCE,
    against_stub,
    assert_cut_then_whole,
    most_open_at_once,
    require_packages,
    start_server,
    stub_path,
    trial,
    user_clip,
)
from tests.upstream.lychee_sidecar import Sidecar
from tests.upstream.support import STUBS, checkout, docs_command, free_port, record_row

REPO = "HITsz-TMG/Lychee-FD"
PACKAGES = "gradio, librosa, soundfile, torch, numpy"
# scripts/start_backend.sh's settings that shape what the client hears, and the sidecar's
BACKEND_ENV = {"LYCHEEFD_USE_VLLM": "1", "LYCHEEFD_REALTIME_TTS_CHUNK_SIZE": "1",
               "LYCHEEFD_TTS_VOCODER_HOP_SIZE": "25", "LYCHEEFD_T2W_STREAM_LOOKAHEAD_LEN": "3",
               "LYCHEEFD_T2W_REMOTE_ENABLED": "1", "LYCHEEFD_T2W_REMOTE_FALLBACK": "0",
               "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
MEASURED: dict = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ck = checkout(REPO)
    require_packages(ck, PACKAGES, "tests/upstream/test_lychee_fd.py")
    tmp = tmp_path_factory.mktemp("lychee")
    port = free_port()
    args = docs_command("python -m lychee_fd.app")[1:]  # after "python"
    args[args.index("--server_port") + 1] = str(port)
    with Sidecar() as sidecar:
        env = {**BACKEND_ENV, "LYCHEEFD_T2W_REMOTE_URL": sidecar.url,
               "LYCHEEFD_REALTIME_ALIGNED_SAVE_DIR": str(tmp / "aligned")}
        # from a folder of ours: Gradio writes its cache beside it, not into the checkout.
        # app.py adds its realtime routes after Gradio's launch() listens (Gradio 6 rebuilds
        # the app inside it): until then session/start is a 404, so one of them must answer
        srv = start_server(ck, [ck.python, *args, "--server_name", "127.0.0.1"], cwd=tmp,
                           stub_path=stub_path(STUBS / "lychee", ck.path), port=port, tmp=tmp,
                           env=env, deadline_s=240.0, ready_path="/api/realtime/voices")
        srv.url = f"http://127.0.0.1:{port}"
        srv.sidecar = sidecar
        yield srv
        srv.stop()
    if MEASURED:
        record_row("lychee-fd", ck, **MEASURED)


@pytest.mark.asyncio
async def test_a_trial_answers_where_the_stub_decided_and_stops_on_barge_in(server, tmp_path):
    # the user speaks 0.3-1.3 s; the stub answers at the end of the first 400 ms round with
    # 0.5 s of silence in it; the user barges in at 2.5 s, then the stub answers again
    before = len(server.events())
    clip = user_clip((0.3, 1.0), (2.5, 0.5), total=3.5)
    rec = await trial(resolve_model("lychee-fd", server_url=server.url), tmp_path, clip,
                      observation_s=2.5)
    events = server.closed_since(before)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "open" and kinds[-1] == "close", kinds  # one session, stopped by us
    assert kinds.count("answer") == 2 and kinds.count("stop") == 1, kinds
    m = against_stub(rec, events)
    assert len(m.onset_err_ms) == 2 and len(m.stop_err_ms) == 1
    assert "speech_started" in [what for _, what in rec.events]  # app.py's audio_interrupt
    assert_cut_then_whole(rec)
    assert [route for route, _ in server.sidecar.calls].count("stream") >= 2
    MEASURED.update(m.row())


@pytest.mark.asyncio
async def test_two_sessions_at_once(server, tmp_path):
    before = len(server.events())
    clip = user_clip((0.2, 0.6), total=1.2)
    model = resolve_model("lychee-fd", server_url=server.url)
    recs = await asyncio.gather(*(trial(model, tmp_path / f"t{i}", clip, observation_s=2.2)
                                  for i in range(2)))
    events = server.closed_since(before)
    assert most_open_at_once(events) == 2
    for rec in recs:
        assert [w.text for w in rec.transcript] == SENTENCE.split()
    MEASURED.update(sessions=2, notes="Token2Wav sidecar and generator stubbed; "
                                      "start_backend.sh's TTS settings")
