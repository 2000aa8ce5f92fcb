"""The timing guard end to end (issue 33): a streaming model that blocks the harness's event
loop on purpose (a deliberate ``time.sleep`` in its send, far over the tolerance whatever the
machine's load) is never scored: each attempt stops at once, is re-run, and the instance is
reported as "timing unreliable", an error in no rate, in report.json, the terminal and the
JUnit properties."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

STALL_MODEL = '''
import asyncio
import time


class Session:
    def __init__(self, stall):
        self.stall, self.sent = stall, 0

    async def send(self, pcm):
        self.sent += 1
        if self.stall and self.sent == 5:
            time.sleep(0.4)  # a blocking call on the harness's event loop, on purpose

    async def events(self):
        await asyncio.Event().wait()  # never answers
        yield

    async def truncate(self, item_id, audio_end_ms):
        pass

    async def close(self):
        pass


class StallModel:
    input_sample_rate = 16000
    output_sample_rate = 16000

    def __init__(self, stall_attempts):
        self.stall_attempts, self.connects = int(stall_attempts), 0

    async def connect(self, info):
        self.connects += 1
        return Session(stall=self.connects <= self.stall_attempts)


def factory(stall_attempts="99"):
    return StallModel(stall_attempts)
'''


def test_a_trial_that_stalls_the_loop_is_rerun_then_unreliable_never_scored(pytester):
    pytester.makepyfile(stall_model=STALL_MODEL)
    res = pytester.runpytest_subprocess(
        "--duplexact-model=stall_model:factory", "--duplexact-condition=take_turn.immediate",
        "--duplexact-limit=1", "--duplexact-concurrency=2", "--duplexact-run-dir=run",
        "--junitxml=junit.xml", "-p", "no:cacheprovider", timeout=240)
    out = res.stdout.str()
    rep = json.loads(Path(pytester.path, "run", "report.json").read_text())
    assert rep["totals"] == {"instances": 1, "errors": 1}, out
    inst = rep["instances"][0]
    assert inst["immediate"] is None and inst["subsequent"] is None  # never scored
    assert inst["error"].startswith("TimingUnreliable: timing unreliable: "), inst["error"]
    assert "lower --duplexact-concurrency or free the machine" in inst["error"]
    clock = inst["clock"]
    assert clock["unreliable"] is True and clock["reruns"] == 2
    assert clock["tolerance_ms"] == 100.0
    assert max(clock["input_lag_max_ms"], clock["loop_stall_max_ms"]) >= 300, clock
    assert rep["clock"]["unreliable"] == 1 and rep["clock"]["rerun"] == 1
    assert rep["clock"]["worst_scored_lag_ms"] is None
    outcome = json.loads(next(Path(pytester.path, "run").rglob("outcome.json")).read_text())
    assert outcome["clock"]["unreliable"] is True
    assert "1 re-run, 1 timing unreliable (errors, in no rate)" in out, out
    # its last attempt ran under the cap its re-runs lowered: 2 halved per attempt, at least 1
    assert rep["measured"]["concurrency"] == {"requested": 2, "sustained_p50": 1,
                                              "sustained_min": 1}
    assert rep["measured"]["loop_cpu_ms_per_stream_s"] >= 0  # its attempts streamed
    assert "Concurrency: 2 requested per process, sustained 1 (p50) / 1 (min); loop CPU " \
        in out, out
    props = {p.get("name"): p.get("value")
             for p in ET.parse(Path(pytester.path, "junit.xml")).iter("property")}
    assert props["duplexact.timing.unreliable"] == "1" and props["duplexact.reruns"] == "2"
    assert float(props["duplexact.timing.worst_lag_ms"]) >= 300
