"""vllm-omni against vLLM-Omni's own code (vllm-project/vllm-omni, a checkout under
$DUPLEXACT_UPSTREAM_DIR; tests/upstream/support.py).

What this module needs from the checkout, and what blocks each part here (docs/models.md,
"vllm-omni: checked against"):

* ``vllm_omni/clients/duplex.py`` + ``clients/minicpmo_4_5.py`` (their client and the MiniCPM-o
  4.5 preset: the standard library, ``pybase64`` and ``websockets``): our session.update is
  compared field by field with their preset's, and their ``DuplexClient`` holds a session with
  our fake server (tests/fakes/vllm_omni_server.py), so the fake speaks what their client
  expects.
* ``vllm_omni/entrypoints/duplex/serving.py`` (``OmniDuplexSessionHandler``) behind their
  session runtime (``vllm_omni/engine/duplex/``) with a stub duplex plugin: not attempted. The
  handler imports ``vllm`` (``vllm.logger``) and opens sessions through ``DuplexOmni``, which
  runs them inside vLLM's engine core; on this machine (no GPU, no vLLM wheel for its CPU
  torch) that needs vLLM's engine, which is the blocker the issue anticipates.

The checkout this project has (be81443c, 2025-12-28) predates the duplex endpoint entirely:
none of the paths above exist there (vLLM-Omni then served Qwen2.5/3-Omni turn by turn and
diffusion models only), so every test here skips saying so. Nothing of theirs is copied: their
modules are imported from the checkout in a child process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap

import pytest

from pytest_duplexact.models.vllm_omni import VllmOmni
from tests.realtime.realtime_support import load_fake_server
from tests.upstream.support import checkout, record_row

REPO = "vllm-project/vllm-omni"
CLIENT = ("vllm_omni/clients/duplex.py", "vllm_omni/clients/minicpmo_4_5.py")
HANDLER = ("vllm_omni/entrypoints/duplex/serving.py", "vllm_omni/entrypoints/duplex_omni.py")
# their package's __init__ imports vLLM; the client modules import none of it ("Modules here
# import no server runtime code", clients/__init__.py): the child registers the package by
# path without running that __init__
_PACKAGE = """
import sys, types
pkg = types.ModuleType("vllm_omni"); pkg.__path__ = [{root!r} + "/vllm_omni"]
sys.modules["vllm_omni"] = pkg
"""


@pytest.fixture(scope="module")
def ck():
    ck = checkout(REPO)
    missing = [p for p in CLIENT + HANDLER if not (ck.path / p).exists()]
    if len(missing) == len(CLIENT + HANDLER):
        record_row("vllm-omni", ck, connects=None,
                   notes="checkout predates the duplex endpoint (/v1/realtime?duplex=1)")
        pytest.skip(f"{ck.short} ({ck.date}) predates vLLM-Omni's duplex endpoint: "
                    f"{', '.join(missing)} absent; check out a commit that has "
                    "docs/serving/realtime_duplex_api.md")
    return ck


def _theirs(ck, code: str, timeout: float = 60) -> str:
    """Run ``code`` with their checkout first on the path, in their interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ck.path)}
    code = _PACKAGE.format(root=str(ck.path)) + textwrap.dedent(code)
    out = subprocess.run([ck.python, "-c", code], capture_output=True,
                         text=True, env=env, timeout=timeout)
    if out.returncode != 0 and "ModuleNotFoundError" in out.stderr:
        pytest.skip(f"their client needs a package this interpreter lacks: "
                    f"{out.stderr.strip().splitlines()[-1]} (install it into "
                    f"{ck.path.name}.venv)")
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_our_open_handshake_is_their_minicpmo_preset(ck):
    if not all((ck.path / p).exists() for p in CLIENT):
        pytest.skip(f"{ck.short}: {', '.join(CLIENT)} absent")
    theirs = json.loads(_theirs(ck, """
        import json
        from vllm_omni.clients.minicpmo_4_5 import create_duplex_session_config
        cfg = create_duplex_session_config(ref_audio="data:audio/wav;base64,AA==")
        print(json.dumps(cfg.to_session_payload(model="openbmb/MiniCPM-o-4_5")))
    """))
    ours = VllmOmni(url="ws://127.0.0.1:1/v1/realtime", ref_audio="data:audio/wav;base64,AA==")
    session = ours.session_update()["session"]
    for key in ("model", "modalities", "input_audio_format", "output_audio_format",
                "sample_rate_hz", "audio", "turn_detection", "ref_audio", "overlap_policy",
                "playback_commit_policy", "extra_body"):
        assert session.get(key) == theirs.get(key), (key, session.get(key), theirs.get(key))


def test_their_client_holds_a_session_with_our_fake(ck):
    if not all((ck.path / p).exists() for p in CLIENT):
        pytest.skip(f"{ck.short}: {', '.join(CLIENT)} absent")
    vf = load_fake_server("vllm_omni_server")

    async def main():
        async with vf.FakeVllmOmniServer(vf.Script(chunk_period_ms=200, speak_s=0.6,
                                                    answer_after_ms=200)) as server:
            out = await asyncio.to_thread(_theirs, ck, f"""
                import asyncio, json
                from vllm_omni.clients.duplex import DuplexClient
                from vllm_omni.clients.minicpmo_4_5 import create_duplex_session_config

                async def main():
                    cfg = create_duplex_session_config(ref_audio="data:audio/wav;base64,AA==")
                    async with DuplexClient({server.url!r}, model="openbmb/MiniCPM-o-4_5",
                                            config=cfg, heartbeat_interval_s=None) as client:
                        caps = client.session_info["capabilities"]
                        pcm = b"\\x00\\x10" * 16000  # 1 s of a constant: the fake's VAD hears it
                        await client.stream_pcm(pcm + b"\\x00\\x00" * 16000, chunk_ms=100)
                        async for response in client.responses():
                            if response.decision == "listen":
                                continue
                            async for _ in response.audio():
                                await client.ack_playback(response.played_ms,
                                                          response_id=response.response_id)
                            await response.wait()
                            print(json.dumps({{"caps": caps, "transcript": response.transcript,
                                              "played_ms": response.played_ms}}))
                            break
                asyncio.run(main())
            """)
            return json.loads(out.splitlines()[-1]), server.sessions[-1]

    seen, rec = asyncio.run(main())
    assert seen["caps"]["chunk_period_ms"] == 200 and seen["caps"]["supports_barge_in"]
    assert seen["transcript"].strip() == vf.Script().text
    assert rec.closed == "client_close" and rec.acks
    record_row("vllm-omni", ck, connects=True, audio=True, text=True,
               notes="their DuplexClient against our fake; handler not run (needs vLLM's "
                     "engine)")

