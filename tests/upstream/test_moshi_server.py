"""``moshi-server`` (models/moshi_server.py, the real client) against Kyutai's own
``python -m moshi.server`` (kyutai-labs/moshi ``moshi/moshi/server.py``), run from the
checkout's ``moshi`` package with the start command ``duplexact models`` prints (its host and
port made 127.0.0.1 and a free one) plus what this machine needs: the tiny random-weight
checkpoint as local files (``--moshi-weight``, ``--mimi-weight``, ``--tokenizer``,
``--config-path`` naming the tiny Mimi's config as a ``file://``), ``--static none`` (no web UI
from the hub), ``--device cpu``, ``HF_HUB_OFFLINE=1``.

What runs is theirs: ``server.py`` (aiohttp, the lock, the handshake, ``recv_loop`` with its
sphn Opus reader and writer, ``decode_and_send``), ``CheckpointInfo``, Mimi and ``LMGen``.
What is ours (stubs/moshi_server/sitecustomize.py): the network guard, and
``torch.cuda.synchronize`` as a no-op on CPU torch (``warmup`` calls it unconditionally).

Environment: ``$DUPLEXACT_UPSTREAM_DIR/kyutai-labs+moshi.venv`` if present, else this
interpreter (torch 2.13 CPU, aiohttp, sphn 0.2, sentencepiece, safetensors: what .ci/run
installs). Streaming at 1x: about a minute with both servers' warm-ups.
"""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.catalogue.paper_models import MOSHI_START, ROUTES
from tests.upstream.moshi_family import (
    MoshiServerProcess,
    free_port,
    http_to_tls_line,
    no_outbound,
    record,
    tiny_files,
    tls_folder,
    trials,
    two_at_once,
)
from tests.upstream.support import DOCS, checkout

REPO = "kyutai-labs/moshi"
MEASURED: dict = {}

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


def printed_argv() -> list[str]:
    """The start command ``duplexact models`` prints for Moshi's own server, which
    docs/models.md prints too."""
    (route,) = [r for r in ROUTES["moshi"] if r.plugin == "moshi-server"]
    assert route.start == "moshi: " + MOSHI_START
    assert MOSHI_START in DOCS.read_text(encoding="utf-8"), "docs/models.md lacks it"
    return shlex.split(MOSHI_START)


def command(ck, files: dict, port: int, ssl_dir=None) -> list[str]:
    argv = printed_argv()
    argv[argv.index("--host") + 1] = "127.0.0.1"
    out = [ck.python, *argv[1:], "--port", str(port), "--static", "none",
           "--moshi-weight", files["lm_weights"], "--mimi-weight", files["mimi_weights"],
           "--tokenizer", files["tokenizer"], "--config-path", files["lm_config"],
           "--device", "cpu"]
    return out + (["--ssl", str(ssl_dir)] if ssl_dir else [])


@pytest.fixture(scope="module")
def moshi(tmp_path_factory):
    ck = checkout(REPO)
    pytest.importorskip("moshi", reason="the tiny checkpoint is written with moshi's loaders")
    pytest.importorskip("sphn")
    d = tmp_path_factory.mktemp("moshi-server")
    files = tiny_files(d / "ckpt")
    port = free_port()
    with MoshiServerProcess(ck, command(ck, files, port), d / "plain", port, tls=False) as srv:
        yield ck, srv, files, d


def test_handshake_audio_and_text_both_ways(moshi, tmp_path):
    ck, srv, _, _ = moshi
    model = resolve_model("moshi-server", url=srv.url)
    m = trials(model, tmp_path, n=3)
    assert m.audio and m.text, m
    MEASURED.update(m.row(), warmup=srv.listened_s)


def test_the_lock_two_clients(moshi):
    ck, srv, _, _ = moshi
    model = resolve_model("moshi-server", url=srv.url, max_sessions="2")
    first, closed, second = two_at_once(model)
    assert second >= closed, (first, closed, second)
    MEASURED["sessions"] = 1


def test_tls_with_ssl(moshi, tmp_path):
    ck, plain, files, d = moshi
    ssl_dir, ca = tls_folder(d / "ssl")
    port = free_port()
    with MoshiServerProcess(ck, command(ck, files, port, ssl_dir), d / "tls", port,
                            tls=True) as srv:
        line = http_to_tls_line(srv.url)
        assert "TLS mismatch" in line and "use url=wss://" in line, line
        m = trials(resolve_model("moshi-server", url=srv.url, ca_file=ca), tmp_path, n=1)
        assert m.audio
        no_outbound(srv)
    MEASURED["tls"] = True


def test_no_connection_beyond_loopback(moshi):
    ck, srv, _, _ = moshi
    no_outbound(srv)
    assert "serving static content" not in srv.tail(20000)  # --static none: no web UI
    frames = [float(x) for x in re.findall(r"frame handled in ([0-9.]+)ms", srv.tail(10**7))]
    step = f"{np.median(frames):.0f} ms median, {max(frames):.0f} ms max" if frames else "?"
    record("moshi-server", ck, MEASURED,
           f"tiny random weights on CPU; listened {MEASURED.get('warmup', 0):.0f} s after "
           f"start (load + warm-up); TLS {'yes' if MEASURED.get('tls') else '?'}; onset: first "
           f"audio vs the stepped route's frame 2; the server's own time per 80 ms frame (its "
           f"log): {step}")
