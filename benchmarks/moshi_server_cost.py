"""What the moshi-server route (models/providers/moshi_server.py) costs in time and CPU, against its fake
(tests/fakes/moshi_server.py: aiohttp, sphn's Ogg/Opus pages) on 127.0.0.1.

1. The Opus round trip, no clock: sphn's encoder then decoder at 24 kHz, in the adapter's
   framing (20 ms frames, a page per two) and the server's (a page per 80 ms Mimi frame): the
   delay of the decoded signal (cross-correlation with the input), and the CPU per second of
   audio each way.
2. Its effect on onsets, at 1x: take-turn trials through the streaming pipeline against the
   fake (in this process); the heard onset (the first sample above 1% of the peak, on the
   16 kHz recording) minus the earliest the reply can sound (the end of the input frame the
   fake answered in, where the stepped route places it).
3. CPU per live session: N sessions at once from this process (adapter + streaming pipeline),
   the fakes in a child process so their CPU is not counted; this process's CPU seconds per
   wall second, divided by N.

    python -m benchmarks.moshi_server_cost [--trials 5] [--sessions 1 4] [--out FILE]

Prints the figures and writes JSON. Sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.models import resolve_model  # noqa: E402
from pytest_duplexact.models.providers.moshi_server import FRAME, SAMPLE_RATE  # noqa: E402
from tests.support.servers import Child  # noqa: E402

MIMI = 1920


def codec(seconds: float = 10.0) -> dict:
    """Delay and CPU of an encode + decode pass in each framing."""
    import sphn

    rng = np.random.default_rng(0)
    x = (0.1 * rng.standard_normal(int(seconds * SAMPLE_RATE))).astype(np.float32)
    out = {}
    for name, frame in (("client->server (20 ms frames, 40 ms pages)", FRAME),
                        ("server->client (80 ms frames, one page each)", MIMI)):
        w, r = sphn.OpusStreamWriter(SAMPLE_RATE), sphn.OpusStreamReader(SAMPLE_RATE)
        pages, t = [], time.process_time()
        for i in range(0, len(x) - frame + 1, frame):
            page = w.append_pcm(x[i:i + frame])
            if len(page):
                pages.append(page)
        enc = time.process_time() - t
        t = time.process_time()
        y = np.concatenate([r.append_bytes(p) for p in pages])
        dec = time.process_time() - t
        n = min(len(x), len(y), 4 * SAMPLE_RATE)
        corr = np.correlate(y[:n], x[:n // 2], "valid")  # y lags x by argmax samples
        lag = int(np.argmax(corr))
        out[name] = {"delay_ms": round(1000 * lag / SAMPLE_RATE, 2), "pages": len(pages),
                     "encode_cpu_ms_per_s": round(1000 * enc / seconds, 2),
                     "decode_cpu_ms_per_s": round(1000 * dec / seconds, 2)}
    return out


async def onsets(trials: int, tmp: Path) -> dict:
    from tests.fakes.moshi_server import MIMI_S, FakeMoshiServer, Script
    from tests.pipelines.helpers import cat, gap, tone
    from tests.upstream.bridged import first_audio_s_of
    from tests.upstream.duplex_checks import trial

    errs = []
    async with FakeMoshiServer(Script(text="sure I can help")) as srv:
        model = resolve_model("moshi-server", url=srv.url)
        for k in range(trials):
            rec = await trial(model, tmp / f"t{k}", cat(gap(0.2), tone(0.4)), observation_s=1.0)
            answered = (srv.sessions[-1].answers[0] + 1) * MIMI_S  # its input frame's end
            errs.append(1000 * (first_audio_s_of(rec.output) - answered))
    return {"trials": trials, "onset_err_ms_median": round(float(np.median(errs)), 1),
            "onset_err_ms_max": round(float(np.max(errs)), 1),
            "onset_err_ms_min": round(float(np.min(errs)), 1)}


URLS = re.compile(r"^wss?://")  # the fakes' one line: their URLs
FAKES = """
import asyncio, sys
from tests.fakes.moshi_server import FakeMoshiServer, Script
async def main():
    servers = [FakeMoshiServer(Script(text="one two three four five six seven eight"))
               for _ in range({n})]
    for s in servers:
        await s.__aenter__()
    print(" ".join(s.url for s in servers), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


def cpu_per_session(n: int, seconds: float, tmp: Path) -> dict:
    """This process's CPU over ``n`` sessions streaming ``seconds`` of input at once."""
    from tests.pipelines.helpers import cat, gap, tone
    from tests.upstream.duplex_checks import trial

    with Child([sys.executable, "-c", FAKES.format(n=n)], ready=URLS, cwd=ROOT,
               stop_s=10) as fakes:
        urls = fakes.line.split()
        assert len(urls) == n, urls
        clip = cat(*[x for _ in range(int(seconds // 2)) for x in (tone(0.8), gap(1.2))])

        async def run():
            await asyncio.gather(*[trial(resolve_model("moshi-server", url=u), tmp / f"s{n}{k}",
                                         clip, observation_s=0.2)
                                   for k, u in enumerate(urls)])

        c0, w0 = time.process_time(), time.monotonic()
        asyncio.run(run())
        cpu, wall = time.process_time() - c0, time.monotonic() - w0
    return {"sessions": n, "wall_s": round(wall, 1), "cpu_s": round(cpu, 2),
            "cpu_share_per_session_pct": round(100 * cpu / wall / n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--sessions", type=int, nargs="*", default=[1, 4])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="moshi-server-bench-"))
    result = {"load_avg": os.getloadavg(), "codec": codec()}
    result["onsets"] = asyncio.run(onsets(args.trials, tmp))
    result["cpu"] = [cpu_per_session(n, args.seconds, tmp) for n in args.sessions]
    result["load_avg_after"] = os.getloadavg()
    for name, c in result["codec"].items():
        print(f"Opus {name}: delay {c['delay_ms']} ms; CPU encode {c['encode_cpu_ms_per_s']} "
              f"ms + decode {c['decode_cpu_ms_per_s']} ms per audio second")
    o = result["onsets"]
    print(f"first audio vs the end of the answered frame, {o['trials']} trials at 1x: median "
          f"{o['onset_err_ms_median']} ms, min {o['onset_err_ms_min']}, max {o['onset_err_ms_max']}")
    for c in result["cpu"]:
        print(f"{c['sessions']} live session(s): {c['cpu_s']} CPU s over {c['wall_s']} s: "
              f"{c['cpu_share_per_session_pct']}% of a core per session")
    print(f"load average {result['load_avg']} -> {result['load_avg_after']}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
