"""The bridges' warm-up (docs/bridge-protocol.md section 8): the first trial's step 0 with and
without it, on a cold and on a warm torch compile cache.

The moshi bridge on the tests' tiny checkpoint (tests/models/providers/moshi_tiny.py, this interpreter)
and, when ``$DUPLEXACT_UPSTREAM_DIR`` holds cofe-ai+flm-audio (and its ``.venv``), the
FLM-Audio bridge on the upstream harness's tiny checkpoint (tests/upstream/stubs/flm_audio),
torch.compile on for both. Each bridge is started four ways, in this order: cold cache +
warm-up (fills the cache), warm cache + warm-up, cold cache + ``--no-warmup``, warm cache +
``--no-warmup``. Per start: the warm-up's seconds (the kit's log line), the seconds from the
command to ``listening on``, and the wall time of steps 0-2 of the first trial (one frame each
over the raw protocol; no deadline, where the plugin's client gives up at ``step_timeout``,
30 s). A cold cache is a fresh ``TORCHINDUCTOR_CACHE_DIR``.

    python -m benchmarks.bridge_warmup [--models moshi,flm-audio] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import ROOT, machine
from pytest_duplexact.bridges import wire
from tests.bridges.model_support import serve_command

STEP_TIMEOUT_S = 30.0  # the bridge client's default step_timeout (docs/models.md, bridge)


def timed_steps(url: str, frames: int = 3, frame: int = 1920) -> list[float]:
    from websockets.sync.client import connect

    rng = np.random.default_rng(0)
    out = []
    with connect(url, max_size=None, open_timeout=60) as ws:
        assert wire.split(ws.recv(timeout=600))[0] == wire.READY
        for _ in range(frames):
            t0 = time.monotonic()
            ws.send(wire.audio((0.05 * rng.standard_normal(frame)).astype(np.float32)))
            while wire.split(ws.recv(timeout=900))[0] != wire.AUDIO:
                pass
            out.append(round(time.monotonic() - t0, 3))
        ws.send(wire.frame(wire.CLOSE))
    return out


def one_start(argv: list[str], env: dict[str, str], cache: str, warmup: bool) -> dict:
    env = dict(env, TORCHINDUCTOR_CACHE_DIR=cache)
    t0 = time.monotonic()
    with serve_command(argv + ([] if warmup else ["--no-warmup"]), env, what=argv[2],
                       timeout=1800) as served:
        listening = time.monotonic() - t0
        steps = timed_steps(served.url)
        found = re.search(r"warmed up in ([0-9.]+) s", served.log())
    return {"warmup_s": float(found.group(1)) if found else None,
            "to_listening_s": round(listening, 2), "steps_s": steps,
            "step0_over_step_timeout": steps[0] > STEP_TIMEOUT_S}


def four_ways(argv: list[str], env: dict[str, str]) -> dict:
    out = {}
    for warmup in (True, False):
        with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
            out[f"cold cache, {'warm-up' if warmup else 'no warm-up'}"] = \
                one_start(argv, env, cache, warmup)
            out[f"warm cache, {'warm-up' if warmup else 'no warm-up'}"] = \
                one_start(argv, env, cache, warmup)
            print(json.dumps(out, indent=1), flush=True)
    return out


def moshi(tmp: Path) -> tuple[list[str], dict[str, str]]:
    from tests.models.providers.moshi_tiny import write_checkpoints

    files = write_checkpoints(tmp / "moshi")
    argv = [sys.executable, "-m", "pytest_duplexact.bridges.moshi_bridge", "--port", "0",
            "--device", "cpu", "--threads", "1"]
    for key, value in files.items():
        argv += ["--" + key.replace("_", "-"), value]
    return argv, dict(os.environ, PYTHONPATH=str(ROOT))


def flm_audio(tmp: Path) -> tuple[list[str], dict[str, str]] | None:
    import subprocess

    root = os.environ.get("DUPLEXACT_UPSTREAM_DIR")
    checkout = Path(root or "/nonexistent") / "cofe-ai+flm-audio"
    if not checkout.is_dir():
        print("flm-audio: skipped (no $DUPLEXACT_UPSTREAM_DIR/cofe-ai+flm-audio)")
        return None
    venv = checkout.parent / (checkout.name + ".venv") / "bin" / "python"
    python = str(venv) if venv.exists() else sys.executable
    seam = ROOT / "tests" / "upstream" / "stubs" / "flm_audio"
    # PYTHONDONTWRITEBYTECODE: the bridge imports the author's modules from the checkout,
    # which nothing of ours writes into (tests/upstream/conftest.py)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(seam), str(ROOT)]),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TORCH_COMPILE_DISABLE", None)
    subprocess.run([python, str(seam / "build.py"), str(tmp / "flm"), "--flm-repo",
                    str(checkout)], check=True, capture_output=True, env=env)
    return [python, "-m", "pytest_duplexact.bridges.flm_audio", "--port", "0", "--checkpoint",
            str(tmp / "flm"), "--flm-repo", str(checkout), "--device", "cpu", "--dtype",
            "float32", "--workaround", "all"], env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="moshi,flm-audio")
    p.add_argument("--out")
    args = p.parse_args()
    results = {"machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            made = {"moshi": moshi, "flm-audio": flm_audio}[name](Path(tmp))
            if made is not None:
                results[name] = four_ways(*made)
    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
