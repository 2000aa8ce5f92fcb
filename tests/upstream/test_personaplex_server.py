"""``moshi-server`` (models/moshi_server.py, the real client) against NVIDIA PersonaPlex's own
``python -m moshi.server`` (NVIDIA/personaplex ``moshi/moshi/server.py``, its fork of Moshi's),
run from the checkout's ``moshi`` package with the command its README and ``duplexact
models`` print (``--ssl DIR``; DIR holds a cert.pem / key.pem for 127.0.0.1 made here, so the
fork's mkcert download is never reached) plus what this machine needs: ``--host 127.0.0.1``
(else its log line asks ``get_lan_ip``, a UDP "connection" to 8.8.8.8), a free ``--port``,
``--static none``, ``--voice-prompt-dir`` with one short WAV, the tiny random checkpoint as
local files (``--moshi-weight``, ``--mimi-weight``, ``--tokenizer``), ``--device cpu``,
``HF_HUB_OFFLINE=1``.

What runs is theirs: ``server.py`` (aiohttp, the query's ``voice_prompt`` / ``text_prompt`` /
``seed``, the lock, ``step_system_prompts_async`` before the handshake, its three loops over
sphn 0.1's pull API), their loaders, Mimi (two of them) and ``LMGen`` with its voice and text
prompts. What is ours (stubs/moshi_server/sitecustomize.py): the network guard, the one hub
file it downloads unconditionally (``config.json``, "to increment download counter") served
from a local placeholder, ``aiohttp.web.run_app`` held to 127.0.0.1 (the fork ignores
``--host``: every interface), and its loaders' module dicts given the tiny shapes (its 7B
shapes are hard-coded, not read from a config); the checkpoint is written by moshi's classes
in the fork's layout (``moshi_family.personaplex_files``). Not run: a GPU, its pinned torch
(<2.5: here 2.13 CPU), ``--cpu-offload`` (accelerate), ``.pt`` voice embeddings (the released
voices), the mkcert path of ``--ssl`` with an empty folder (it downloads mkcert from GitHub).

Environment: ``$DUPLEXACT_UPSTREAM_DIR/NVIDIA+personaplex.venv``, its pins where CPU torch
allows (sphn 0.1's ``read_pcm`` / ``read_bytes`` API is what its server calls)::

    python -m venv --system-site-packages NVIDIA+personaplex.venv
    NVIDIA+personaplex.venv/bin/pip install "sphn>=0.1.4,<0.2" "aiohttp>=3.10.5,<3.11" pyloudnorm

Streaming at 1x: 2-3 minutes on 2 loaded cores (each session first runs its prompts).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time

import numpy as np
import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.catalogue.paper_models import OTHER_ROUTES, PERSONAPLEX_START
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.moshi_server import probed
from tests.upstream.moshi_family import (
    MoshiServerProcess,
    free_port,
    http_to_tls_line,
    no_outbound,
    personaplex_files,
    record,
    tls_folder,
    trials,
    two_at_once,
)
from tests.upstream.support import DOCS, checkout

REPO = "NVIDIA/personaplex"
VOICE = "TINY.wav"
PROMPT = "You are a tiny test model."
MEASURED: dict = {}

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


def printed_argv() -> list[str]:
    """The README's command, as ``duplexact models`` and docs/models.md print it."""
    (route,) = OTHER_ROUTES["personaplex"]
    assert route.start == "personaplex: " + PERSONAPLEX_START
    assert PERSONAPLEX_START in DOCS.read_text(encoding="utf-8"), "docs/models.md lacks it"
    argv = shlex.split(PERSONAPLEX_START.split("; ", 1)[1])
    assert argv[:3] == ["python", "-m", "moshi.server"] and "--ssl" in argv, argv
    return argv


def voice_folder(folder):
    import soundfile as sf

    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(24_000) / 24_000  # 1 s of a voice-like tone
    voice = 0.1 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2
    sf.write(folder / VOICE, voice.astype(np.float32), 24_000)
    return folder


@pytest.fixture(scope="module")
def personaplex(tmp_path_factory):
    ck = checkout(REPO)
    pytest.importorskip("moshi", reason="the tiny checkpoint is written with moshi's classes")
    pull = subprocess.run([ck.python, "-c", "import sphn, aiohttp, pyloudnorm; "
                           "assert hasattr(sphn.OpusStreamReader, 'read_pcm')"],
                          capture_output=True, text=True, timeout=120)
    if pull.returncode:
        pytest.skip(f"{ck.python} cannot run {REPO}'s server (it needs sphn 0.1's read_pcm, "
                    "aiohttp and pyloudnorm): build NVIDIA+personaplex.venv as "
                    "tests/upstream/test_personaplex_server.py says")
    d = tmp_path_factory.mktemp("personaplex-server")
    files = personaplex_files(d / "ckpt")
    ssl_dir, ca = tls_folder(d / "ssl")
    hub = d / "hub-config.json"
    hub.write_text("{}")  # read by nothing: the download is its counter
    port = free_port()
    argv = printed_argv()
    argv[argv.index("--ssl") + 1] = str(ssl_dir)
    cmd = [ck.python, *argv[1:], "--host", "127.0.0.1", "--port", str(port), "--static", "none",
           "--voice-prompt-dir", str(voice_folder(d / "voices")),
           "--moshi-weight", files["lm_weights"], "--mimi-weight", files["mimi_weights"],
           "--tokenizer", files["tokenizer"], "--device", "cpu"]
    env = {"DUPLEXACT_TINY_LOADERS": files["loaders"],
           "DUPLEXACT_HUB_FILES": json.dumps({"nvidia/personaplex-7b-v1/config.json": str(hub)})}
    with MoshiServerProcess(ck, cmd, d / "run", port, tls=True, env=env) as srv:
        yield ck, srv, ca


def options(srv, ca, **more) -> dict:
    return dict(url=srv.url, ca_file=ca, voice_prompt=VOICE, text_prompt=PROMPT, **more)


def test_handshake_after_its_prompts_audio_and_text(personaplex, tmp_path):
    ck, srv, ca = personaplex
    t = time.monotonic()
    p = probed(**options(srv, ca), probe_timeout="300")
    assert p.description.startswith("a moshi server: handshake after"), p
    MEASURED["handshake_s"] = time.monotonic() - t
    m = trials(resolve_model("moshi-server", **options(srv, ca)), tmp_path, n=2)
    assert m.audio and m.text, m
    MEASURED.update(m.row(), warmup=srv.listened_s)


def test_refusals_one_line_each(personaplex):
    ck, srv, ca = personaplex
    cases = [(dict(voice_prompt="NOPE.pt"), "'NOPE.pt' is not a file in the folder"),
             (dict(voice_prompt=None), "does so without voice_prompt="),
             (dict(seed="3"), "drop the seed option")]
    for change, expected in cases:
        o = {k: v for k, v in {**options(srv, ca), **change}.items() if v is not None}
        with pytest.raises(ModelConfigError) as e:
            probed(**o)
        assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)
    log = srv.tail(200_000)
    assert "Requested voice prompt 'NOPE.pt' not found" in log
    assert "KeyError: 'voice_prompt'" in log and "KeyError: 'seed'" in log
    line = http_to_tls_line(srv.url)
    assert "TLS mismatch" in line and "use url=wss://" in line, line


def test_the_lock_two_clients(personaplex):
    ck, srv, ca = personaplex
    model = resolve_model("moshi-server", **options(srv, ca), max_sessions="2")
    first, closed, second = two_at_once(model)
    assert second >= closed, (first, closed, second)
    MEASURED["sessions"] = 1


def test_no_connection_beyond_loopback(personaplex):
    ck, srv, _ = personaplex
    no_outbound(srv)
    assert srv.events("bound_loopback"), "run_app was not held to 127.0.0.1"
    assert srv.events("hub_local"), "its config.json download was not served locally"
    record("personaplex", ck, MEASURED,
           f"tiny random weights, CPU torch 2.13 (it pins <2.5), TLS (--ssl); its prompts "
           f"before each handshake took {MEASURED.get('handshake_s', 0):.0f} s; listened "
           f"{MEASURED.get('warmup', 0):.0f} s after start; onset: first audio vs the stepped "
           "route's frame 2")
