"""Timing of the four open-server adapters (freeze-omni, vita-1.5, lychee-fd, mini-omni2)
against their fakes (tests/fakes/, in this process on 127.0.0.1), the real client libraries.

Per adapter, N short trials (concurrently, except mini-omni2: its server takes one request at
a time): the recorded output's onset and offset (energy threshold on the heard track) minus
what the fake actually did, the send time of its first audio and where the audio it sent ends
playing at 1x (both on time.monotonic(), the loop's clock). Then one interruption trial each
(not mini-omni2, which has none, nor vita-1.5, whose cut comes with its next answer): how far
playback stopped from the interruption event's send time. vita-1.5's trials run one at a time
(its server shares one output queue among users).

    python -m benchmarks.server_adapters [--trials 6] [--out FILE]

Prints one table and writes JSON. Sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.data.audio import SAMPLE_RATE  # noqa: E402
from pytest_duplexact.models.providers.lychee_fd import factory as lychee  # noqa: E402
from pytest_duplexact.models.providers.mini_omni2 import factory as mini_omni2  # noqa: E402
from pytest_duplexact.models.providers.socketio_omni import freeze_omni, vita_15  # noqa: E402
from tests.support import realtime as rs  # noqa: E402
from tests.support.builders import speech_clip  # noqa: E402
from tests.support.servers import load_fake_server  # noqa: E402

sio = load_fake_server("socketio_server")
ly = load_fake_server("lychee_server")
mo = load_fake_server("miniomni_server")
played_end = load_fake_server("fake_http").played_end


def bounds(rec):
    return rs.fake.energy_bounds(rec.output, SAMPLE_RATE)


async def socketio_trials(name, build, n):
    """Concurrently for Freeze-Omni; one at a time for VITA-1.5, whose server shares one
    output queue among its users (the adapter's max_concurrency)."""
    async with sio.FakeOmniServer(name, sio.Script(segments=2, segment_s=0.6, max_users=64)) as server:
        ends = [0.6 + 0.1 * (i % 4) for i in range(n)]

        def trial(e):
            return rs.run_trial(build(server_url=server.url, verify="false"),
                                rs.user_clip([(0.2, e)], total=e + 2.6))
        if name == "vita-1.5":
            trials = [await trial(e) for e in ends]
        else:
            trials = await asyncio.gather(*(trial(e) for e in ends))
        truths = {s.sid: s for s in server.sessions}
        # sessions are in connection order; match each trial by its session's sid
        return [(t, truths[t.session.sid].turns[0].sends) for t in trials]


async def socketio_cut(name, build):
    """The next turn decided while the answer plays cuts it (stop_tts). The fake's VAD stays
    triggered 0.8 s after speech here (Freeze-Omni's is 2 s: docs/models.md)."""
    script = sio.Script(segments=3, segment_s=1.0, max_turns=1, vad_end_ms=800.0)
    async with sio.FakeOmniServer(name, script) as server:
        t = await rs.run_trial(build(server_url=server.url, verify="false"),
                               rs.user_clip([(0.2, 0.8), (1.8, 2.3)], total=3.4))
        turn = server.sessions[0].turns[0]
    return bounds(t.record)[1] - (turn.cut_at - t.t0)


async def lychee_trials(n):
    async with ly.FakeLycheeServer(ly.Script(speak_s=1.0)) as server:
        ends = [0.6 + 0.1 * (i % 4) for i in range(n)]
        trials = await asyncio.gather(*(rs.run_trial(lychee(server_url=server.url),
                                                     rs.user_clip([(0.2, e)], total=e + 2.4))
                                        for e in ends))
        by_id = {s.session_id: s for s in server.sessions}
        return [(t, by_id[t.session.session_id].turns[0].sends) for t in trials]


async def lychee_cut():
    async with ly.FakeLycheeServer(ly.Script(speak_s=2.0, pace=4.0, max_turns=1)) as server:
        t = await rs.run_trial(lychee(server_url=server.url),
                               rs.user_clip([(0.2, 0.8), (2.0, 2.4)], total=3.2))
        turn = server.sessions[0].turns[0]
    return bounds(t.record)[1] - (turn.cut_at - t.t0)


async def mini_omni2_trials(n):
    out = []
    async with mo.FakeMiniOmniServer() as server:
        for i in range(n):  # one at a time, as the server serves
            t = await rs.run_trial(mini_omni2(server_url=server.url),
                                   speech_clip(0.2, 1.2 + 0.2 * (i % 3), total=4.0))
            out.append((t, server.sessions[-1].sends))
    return out


def errors(pairs):
    onset, offset = [], []
    for t, sends in pairs:
        on, off = bounds(t.record)
        onset.append(on - (sends[0][0] - t.t0))
        offset.append(off - played_end(sends, t.t0))
    return np.abs(onset) * 1000, np.abs(offset) * 1000


async def main(n: int) -> dict:
    rows = {}
    for name, build in (("freeze-omni", freeze_omni), ("vita-1.5", vita_15)):
        # VITA's cut only comes with its next answer (stop_tts in place of that answer's first
        # segment): no stop time of its own to measure
        cut = await socketio_cut(name, build) if name == "freeze-omni" else None
        rows[name] = (await socketio_trials(name, build, n), cut)
    rows["lychee-fd"] = (await lychee_trials(n), await lychee_cut())
    rows["mini-omni2"] = (await mini_omni2_trials(n), None)
    table = {}
    for name, (pairs, cut) in rows.items():
        on, off = errors(pairs)
        table[name] = {"trials": len(pairs), "onset_ms_median": float(np.median(on)),
                       "onset_ms_max": float(on.max()), "offset_ms_median": float(np.median(off)),
                       "offset_ms_max": float(off.max()),
                       "stop_after_interrupt_ms": None if cut is None else float(cut * 1000)}
    return table


def render(table: dict) -> str:
    lines = ["| adapter | trials | onset error median / max (ms) | offset error median / max "
             "(ms) | playback stop after the interruption event (ms) |",
             "|---|---|---|---|---|"]
    for name, r in table.items():
        cut = "n/a" if r["stop_after_interrupt_ms"] is None else \
            f"{r['stop_after_interrupt_ms']:+.1f}"
        lines.append(f"| {name} | {r['trials']} | {r['onset_ms_median']:.1f} / "
                     f"{r['onset_ms_max']:.1f} | {r['offset_ms_median']:.1f} / "
                     f"{r['offset_ms_max']:.1f} | {cut} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--out", default="duplexact-runs/benchmarks/server_adapters.json")
    args = parser.parse_args()
    result = asyncio.run(main(args.trials))
    print(render(result))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
