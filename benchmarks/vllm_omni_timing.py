"""How exact is the vllm-omni route's timeline, at concurrency 1 and 4?

Runs N trials through the real vllm-omni adapter against the fake vLLM-Omni duplex server
(tests/fakes/vllm_omni_server.py, in its own process on 127.0.0.1; 100 ms model units). Half
the trials are talked over (``barge_in_on_speech``: the fake cancels the response). Reports

* onset error: the recorded response onset (energy threshold on the output track) minus the
  instant the fake actually sent the response's first audio delta (both clocks are
  ``time.monotonic()``);
* after a barge-in: the ``played_ms`` of the truncating ``playback.ack`` the fake received
  minus the milliseconds of the fake's tone the recording holds (its energy), i.e. whether
  the server's history is told what a listener heard.

    python -m benchmarks.vllm_omni_timing [--instances 8] [--concurrency 1 4]

With ``--upstream DIR`` (a folder holding a vllm-project+vllm-omni checkout that has the duplex
endpoint, and its ``.venv``: tests/upstream/test_vllm_omni.py) the server is vLLM-Omni's own
WebSocket handler in front of our stub runtime (tests/upstream/stubs/vllm_omni_runtime.py:
100 ms units, a 1 s tone 0.5 s after the user stops) instead of the fake; the truth is then the
instant the stub handed each first delta to their handler. Sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.data.audio import SAMPLE_RATE  # noqa: E402
from pytest_duplexact.models.providers.vllm_omni import factory  # noqa: E402
from tests.support import realtime as support  # noqa: E402
from tests.support.servers import child  # noqa: E402

fake = support.fake
SPEAK_S = 2.0


def tone_ms(y: np.ndarray, amplitude: float = 0.3) -> float:
    return float((y.astype(np.float64) ** 2).sum() / (amplitude ** 2 / 2) / SAMPLE_RATE * 1000)


def first_turn(session: dict) -> dict:
    """The first response's truth, in the fake's and in the stub runtime's log alike."""
    turn = (session.get("turns") or session.get("responses"))[0]
    return {"response_id": turn["response_id"], "first_audio_at": turn["first_audio_at"],
            "cut_at": turn["cut_at"]}


async def level(url: str, n: int, concurrency: int) -> list[dict]:
    gate = asyncio.Semaphore(concurrency)

    async def trial(i: int) -> dict:
        over = i % 2 == 1
        tag = f"c{concurrency}-{i}"
        script = {"chunk_period_ms": 100, "answer_after_ms": 400, "speak_s": SPEAK_S,
                  "max_turns": 1, "tag": tag}
        spans = [(0.2, 0.8)] + ([(2.0, 2.4)] if over else [])
        async with gate:  # the probe is a session too: it counts against admission
            model = await asyncio.to_thread(
                factory, url=url, instructions="SCRIPT " + json.dumps(script),
                overlap_policy="barge_in_on_speech" if over else "listen_only")
            rec, _, t0, session = await support.run_trial(
                model, support.user_clip(spans, 3.4), block=0.04)
        bounds = fake.energy_bounds(rec.output, SAMPLE_RATE)
        return {"tag": tag, "over": over, "t0": t0, "onset": bounds and bounds[0],
                "session_id": session.session_id, "output": rec.output,
                "stall": support.stall(rec)}

    return await asyncio.gather(*(trial(i) for i in range(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=8)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--upstream", help="run vLLM-Omni's handler from DIR/vllm-project+vllm-omni")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "truth.json"
        if args.upstream:
            checkout = Path(args.upstream) / "vllm-project+vllm-omni"
            python = Path(args.upstream) / "vllm-project+vllm-omni.venv" / "bin" / "python"
            server = child(ROOT / "tests/upstream/stubs/vllm_omni_runtime.py", "--log", log,
                           "--max-sessions", max(args.concurrency), python=str(python),
                           # the author's modules are imported from the checkout: no
                           # __pycache__ written into it (tests/upstream/conftest.py)
                           env={**os.environ, "PYTHONPATH": str(checkout),
                                "PYTHONDONTWRITEBYTECODE": "1"})
        else:
            server = child("vllm_omni_server.py", "--log", log)
        with server:
            url = f"ws://127.0.0.1:{server.port}/v1/realtime?duplex=1"
            runs = {c: asyncio.run(level(url, args.instances, c)) for c in args.concurrency}
        logged = json.loads(log.read_text())
        sessions = logged["sessions"] if isinstance(logged, dict) else logged
        truth = {s["session_id"]: s for s in sessions}
    server = "vLLM-Omni's handler + our stub runtime" if args.upstream else "the fake"
    print(f"| concurrency | onset error vs {server}'s send, ms (median / max) | truncating "
          "ack - heard, ms (each barge-in) | largest loop stall, ms |")
    print("|---|---|---|---|")
    for c, trials in runs.items():
        onsets, acks = [], []
        for t in trials:
            s = truth[t["session_id"]]
            turn = first_turn(s)
            onsets.append(abs(t["onset"] - (turn["first_audio_at"] - t["t0"])) * 1000)
            if t["over"]:
                # the last ack of the cut response: what a listener heard of it (0.30.0's
                # handler drops the wire's truncate flag, so the runtime's log has none)
                cut = [a for a in s["acks"] if a["response_id"] == turn["response_id"]][-1]
                upto = int((turn["cut_at"] - t["t0"] + 0.05) * SAMPLE_RATE)
                acks.append(cut["played_ms"] - tone_ms(t["output"][:upto]))
        print(f"| {c} | {np.median(onsets):.1f} / {max(onsets):.1f} | "
              f"{', '.join(f'{a:+.0f}' for a in acks)} | "
              f"{max(t['stall'] for t in trials) * 1000:.0f} |")


if __name__ == "__main__":
    main()
