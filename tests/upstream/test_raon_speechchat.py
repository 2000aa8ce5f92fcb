"""``raon-speechchat`` (models/raon_speechchat.py, the real client) against the authors' own
gateway: krafton-ai/Raon-SpeechChat-Demo's ``launch_gateway.py`` started with the command
docs/models.md prints (its port a free one, on 127.0.0.1), over wss:// with a certificate made
by the demo's own openssl command (CN only), verified through ``server_name``.

What runs is theirs: ``launch_gateway.py``, ``gateway/server.py`` and ``gateway/proxy.py``
(uvicorn, wsproto, the framing of ``proto/``), the router (``router/actor.py``,
``router/registry.py``: reservations, capacity, "no workers available"), the worker actor
(``worker/actor.py``: ``feed_and_decode``, one frame per call) and the engine
(``worker/engine.py``: sessions, capacity, ``feed_audio``, ``run_step``; ``SessionState``).
What is ours (tests/upstream/stubs/): Ray, by an in-process stand-in (``stubs/raon/ray``) whose
``init`` starts what ``launch_worker.py --role head`` would (``stubs/raon/raon_cluster.py``:
the authors' router and one worker with ``FD_MAX_SESSIONS_PER_GPU`` = 2 sessions); the model
calls of ``RaonWorkerSession`` (no SGLang model: ``stubs/duplexact_turns.py`` answers 0.5 s
after the user stops with a 1 s voice-like tone and a fixed sentence, and stops when the user
barges in); the web build the gateway insists on (a placeholder ``frontend-next/out/``).
The checkout is not touched: the gateway runs from a folder of links to its packages beside
our placeholder, ``launch_gateway.py`` itself run by path from the checkout.

Its environment, ``$DUPLEXACT_UPSTREAM_DIR/krafton-ai+Raon-SpeechChat-Demo.venv``::

    python3.11 -m venv krafton-ai+Raon-SpeechChat-Demo.venv
    krafton-ai+Raon-SpeechChat-Demo.venv/bin/pip install fastapi "uvicorn[standard]" \\
        "websockets<14" wsproto numpy torch==2.13.0

(``requirements.gateway.txt`` without ``ray``; torch only for ``worker/actor.py``'s
``initialize``.) Streaming at 1x: about 20 s in all.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

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
from tests.upstream.support import (
    STUBS,
    checkout,
    docs_command,
    free_port,
    record_row,
    run_tree,
)

REPO = "krafton-ai/Raon-SpeechChat-Demo"
PACKAGES = "fastapi, uvicorn, wsproto, websockets, numpy, torch"
CERT_NAME = "raon-speechchat-demo"  # scripts/entrypoint_gateway.sh
PER_GPU = 2  # docker-compose.yml's FD_MAX_SESSIONS_PER_GPU
MEASURED: dict = {}


def link_farm(ck, folder: Path) -> Path:
    """The checkout as links (``support.run_tree``), with our placeholder web build and the
    demo's certificate in real folders of its own."""
    run_tree(ck, folder, writable=("frontend-next/out", "certs"))
    (folder / "frontend-next" / "out" / "index.html").write_text("<html>harness</html>\n")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout",
                    "certs/key.pem", "-out", "certs/cert.pem", "-days", "365", "-nodes",
                    "-subj", f"/CN={CERT_NAME}"], cwd=folder, check=True, capture_output=True,
                   timeout=60)
    return folder


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    ck = checkout(REPO)
    require_packages(ck, PACKAGES, "tests/upstream/test_raon_speechchat.py")
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the demo's certificate (scripts/entrypoint_gateway.sh)")
    tmp = tmp_path_factory.mktemp("raon")
    farm = link_farm(ck, tmp / "farm")
    port = free_port()
    args = docs_command("python3 launch_gateway.py")[2:]  # the arguments
    args[args.index("--port") + 1] = str(port)
    run = ("import runpy, sys; sys.argv = [sys.argv[0]] + sys.argv[1:]; "
           f"runpy.run_path({str(ck.path / 'launch_gateway.py')!r}, run_name='__main__')")
    server = start_server(ck, [ck.python, "-c", run, *args, "--host", "127.0.0.1"], cwd=farm,
                          stub_path=stub_path(STUBS / "raon", farm), port=port, tmp=tmp,
                          env={"FD_MAX_SESSIONS_PER_GPU": str(PER_GPU)})
    server.url = f"wss://127.0.0.1:{port}"
    server.cert = str(farm / "certs" / "cert.pem")
    yield server
    server.stop()
    if MEASURED:
        record_row("raon-speechchat", ck, **MEASURED)


def model(gw, **options):
    return resolve_model("raon-speechchat", url=gw.url, ca_file=gw.cert, server_name=CERT_NAME,
                         **options)


@pytest.mark.asyncio
async def test_a_trial_answers_where_the_stub_decided_and_stops_on_barge_in(gateway, tmp_path):
    # the user speaks 0.3-1.3 s; the stub answers ~0.5 s later; the user barges in at 2.3 s
    # for 0.5 s (the answer stops), then the stub answers again after that turn
    before = len(gateway.events())
    clip = user_clip((0.3, 1.0), (2.3, 0.5), total=3.3)
    rec = await trial(model(gateway), tmp_path, clip, observation_s=2.0)
    events = gateway.closed_since(before)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "open" and kinds[-1] == "close", kinds  # one session, ended by us
    assert kinds.count("answer") == 2 and kinds.count("stop") == 1, kinds
    m = against_stub(rec, events)
    assert len(m.onset_err_ms) == 2 and len(m.stop_err_ms) == 1
    assert_cut_then_whole(rec)
    assert rec.usage["audio_out_s"] > 1.0
    MEASURED.update(m.row())


@pytest.mark.asyncio
async def test_sessions_at_once_and_a_full_gateway_waited_out(gateway, tmp_path):
    # three trials at once against a worker of two sessions: the third is refused with
    # "no workers available" and waits until one of the first two ends
    before = len(gateway.events())
    raon = model(gateway, max_sessions=str(PER_GPU + 1))
    clip = user_clip((0.2, 0.6), total=1.0)
    recs = await asyncio.gather(*(trial(raon, tmp_path / f"t{i}", clip, observation_s=1.4)
                                  for i in range(3)))
    events = gateway.closed_since(before)
    assert [e["event"] for e in events].count("open") == 3
    assert most_open_at_once(events) == PER_GPU
    refused = gateway.log.read_text().count("no workers available for session")
    assert refused >= 1, gateway.tail()
    for rec in recs:
        assert [w.text for w in rec.transcript] == SENTENCE.split()
    MEASURED.update(sessions=most_open_at_once(events),
                    notes=f"{refused} 'no workers available' waited out (worker of "
                          f"{PER_GPU} sessions, 3 trials at once)")

