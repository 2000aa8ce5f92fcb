"""vllm-omni against vLLM-Omni's own code (vllm-project/vllm-omni, a checkout under
$DUPLEXACT_UPSTREAM_DIR; tests/upstream/support.py). Nothing of theirs is copied: their modules
are imported from the checkout in a child process, in their interpreter
(``<checkout>.venv``: ``pybase64 websockets fastapi uvicorn msgspec numpy``; a missing one
skips, naming it).

* Their client (``vllm_omni/clients/duplex.py``, the MiniCPM-o 4.5 preset): our
  ``session.update`` is compared field by field with their preset's, and their
  ``DuplexClient`` holds a session with our fake server, so the fake speaks what their client
  expects.
* Their WebSocket handler (``OmniDuplexSessionHandler``, ``entrypoints/duplex/serving.py``)
  served over a real socket, with their typed commands and events, in front of our stub
  session runtime and model (tests/upstream/stubs/vllm_omni_runtime.py: listen while the user
  speaks, a 1 s tone 0.5 s after, a fixed transcript; cancelled by speech under
  ``barge_in_on_speech``), driven by our adapter: the capabilities, onsets against the
  stub's send times, the barge-in cut and the ack position, two sessions at once, admission
  refusal. Their engine-side session runtime (``engine/duplex/session/runner.py``) is not
  run: ``DuplexOmni`` runs it inside vLLM's engine core, and vLLM has no build for this
  machine's CPU torch.

The checkout this project has (be81443c, 2025-12-28) predates the duplex endpoint entirely,
so there every test skips saying so; the tests ran against the vllm-omni 0.30.0 release (the
PyPI wheel unpacked into a git work tree: docs/models.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.vllm_omni import VllmOmni, factory, reach
from pytest_duplexact.models.streaming_contract import TransientModelError
from tests.support.realtime import (
    fake,
    load_allowance,
    load_fake_server,
    run_trial,
    user_clip,
)
from tests.support.servers import ChildFailed, child
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
               notes="their DuplexClient against our fake")



# --- their handler in front of our stub runtime ---------------------------------------------

RUNTIME = Path(__file__).resolve().parent / "stubs" / "vllm_omni_runtime.py"
TRANSCRIPT_WORDS = ("This", "is", "the", "stub")  # the stub's fixed transcript


class Runtime:
    """Their handler behind our stub runtime, in its own process, in their interpreter."""

    def __init__(self, ck, log: Path, max_sessions: int):
        missing = [p for p in HANDLER if not (ck.path / p).exists()]
        if missing:
            pytest.skip(f"{ck.short}: {', '.join(missing)} absent")
        self.log = log
        try:
            self.child = child(RUNTIME, "--log", log, "--max-sessions", max_sessions,
                               python=ck.python, env={**os.environ, "PYTHONPATH": str(ck.path)},
                               stderr=subprocess.PIPE)
        except ChildFailed as e:
            if "ModuleNotFoundError" in e.stderr:
                pytest.skip(f"their handler needs a package {ck.python} lacks: "
                            f"{e.stderr.strip().splitlines()[-1]}")
            raise
        self.url = f"ws://127.0.0.1:{self.child.port}/v1/realtime?duplex=1"

    def stop(self) -> dict:
        self.child.stop()
        return json.loads(self.log.read_text())


def _tone_ms(y: np.ndarray) -> float:
    """Milliseconds of the stub's 0.3-amplitude tone in ``y``, from its energy."""
    return float((y.astype(np.float64) ** 2).sum() / (0.3 ** 2 / 2) / SAMPLE_RATE * 1000)


def test_our_adapter_through_their_handler(ck, tmp_path):
    """Two sessions at once: one answered in full, one talked over (barge_in_on_speech)."""
    runtime = Runtime(ck, tmp_path / "truth.json", max_sessions=4)
    try:
        described = reach(url=runtime.url)

        async def trial(over: bool):
            model = await asyncio.to_thread(
                factory, url=runtime.url,
                overlap_policy="barge_in_on_speech" if over else "listen_only")
            spans = [(0.2, 0.8)] + ([(1.8, 2.2)] if over else [])
            return await run_trial(model, user_clip(spans, 2.6), block=0.04)

        async def both():
            return await asyncio.gather(trial(False), trial(True))

        results = asyncio.run(both())
    finally:
        truth = runtime.stop()
    assert described.startswith("openbmb/MiniCPM-o-4_5: model_native_duplex, chunk period "
                                "100 ms, barge in yes, playback ack yes")
    sessions = [s for s in truth["sessions"] if s["t0"] is not None]
    assert len(sessions) == 2 and all(s["closed"] == "client_close" for s in truth["sessions"])
    by_policy = {s["policy"]: s for s in sessions}
    errors = []
    for (rec, _, t0, session), policy in zip(results, ("listen_only", "barge_in_on_speech")):
        first = by_policy[policy]["responses"][0]
        onset, _ = fake.energy_bounds(rec.output, SAMPLE_RATE)
        errors.append(onset - (first["first_audio_at"] - t0))
        assert abs(errors[-1]) <= 0.040 + load_allowance(rec), (policy, errors[-1], rec.events)
        assert TRANSCRIPT_WORDS[0] in [w.text for w in rec.transcript]
    plain_rec, cut_rec = results[0].record, results[1].record
    assert max(a["played_ms"] for a in by_policy["listen_only"]["acks"]) == 1000
    assert _tone_ms(plain_rec.output) == pytest.approx(1000, abs=5)
    cut = by_policy["barge_in_on_speech"]["responses"][0]
    assert cut["ended"] == "barge_in"
    acks = [a for a in by_policy["barge_in_on_speech"]["acks"]
            if a["response_id"] == cut["response_id"]]
    # heard: the tone up to where the client stopped playback (its own truncate event), not
    # a fixed 50 ms past the stub's cut, which a client reading the cancel late can overrun
    stops = [t for t, what in cut_rec.events if what.startswith("truncate ")]
    assert stops, cut_rec.events
    heard_ms = _tone_ms(cut_rec.output[: int((stops[0] + 0.05) * SAMPLE_RATE)])
    assert abs(acks[-1]["played_ms"] - heard_ms) <= 5, (acks[-1], heard_ms)
    assert any(w.startswith("overlap.decision barge_in") for _, w in cut_rec.events)
    ms = np.abs(errors) * 1000
    print(f"vllm-omni through their handler, 2 sessions at once: onset |error| vs the stub's "
          f"send median {np.median(ms):.1f} ms, max {ms.max():.1f} ms; ack after the barge-in "
          f"{acks[-1]['played_ms']} ms, recording holds {heard_ms:.1f} ms")
    record_row("vllm-omni", ck, connects=True, audio=True, text=True, barge_in_stop=True,
               onset_err_ms_median=round(float(np.median(ms)), 1),
               onset_err_ms_max=round(float(ms.max()), 1), sessions=2,
               notes="their OmniDuplexSessionHandler; our stub runtime and model (their "
                     "engine-side runner needs vLLM's engine)")


def test_their_handlers_admission_refusal_reaches_our_adapter(ck, tmp_path):
    """``max_sessions`` 1: a second session is refused by their handler's error envelope;
    during a run that is transient (retried), at the probe one line."""
    runtime = Runtime(ck, tmp_path / "truth.json", max_sessions=1)
    try:
        async def main():
            model = await asyncio.to_thread(factory, url=runtime.url)
            first = await model.connect(None)
            try:
                with pytest.raises(TransientModelError) as busy:
                    await model.connect(None)
                with pytest.raises(ModelConfigError) as refused:
                    await asyncio.to_thread(reach, url=runtime.url)
            finally:
                await first.close()
            return str(busy.value), str(refused.value)

        busy, refused = asyncio.run(main())
    finally:
        truth = runtime.stop()
    assert "resource_exhausted: duplex_session_capacity_exhausted: limit=1" in busy
    assert refused.startswith("vllm-omni: the server refused the session: resource_exhausted")
    assert "\n" not in refused and truth["refused"] == 2
