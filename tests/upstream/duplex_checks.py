"""What the Raon-SpeechChat and Lychee-FD harness modules share: the author's server as a child
process (started, waited for, stopped, its log kept), one trial of the REAL adapter through the
streaming pipeline, and the measurements against the stub's decisions
(stubs/duplexact_turns.py: its JSON-lines log of answer / stop / open / close per session).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.pipelines.helpers import cat, gap, spans, tone
from tests.support.builders import make_instance
from tests.upstream import support
from tests.upstream.support import STUBS

SENTENCE = "this is the stub answering you"  # stubs/duplexact_turns.py
ANSWER_S = 1.0


def require_packages(ck, modules: str, module_file: str) -> None:
    """Skip, saying how to build it, when the checkout's interpreter lacks ``modules``."""
    r = subprocess.run([ck.python, "-c", f"import {modules}"], capture_output=True, text=True,
                       timeout=120)
    if r.returncode:
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"{ck.python} cannot run {ck.repo}'s server ({why}): build "
                    f"{ck.path.name}.venv as {module_file} says")


class Server(support.Server):
    """``support.Server`` (started, its process family stopped, its log kept) that also reads
    the stub's decisions (stubs/duplexact_turns.py's JSON lines in ``stub_log``)."""

    def __init__(self, ck: support.Checkout, cmd: list[str], *, cwd: Path, stub_path: str,
                 tmp: Path, env: dict[str, str] | None = None):
        self.stub_log = tmp / "stub.jsonl"
        super().__init__(ck, shlex.join(cmd), cwd, [Path(p) for p in stub_path.split(os.pathsep)],
                         tmp / "server.log", env={"DUPLEXACT_STUB_LOG": str(self.stub_log),
                                                  **(env or {})})

    def stop(self) -> None:
        self.__exit__()

    def events(self) -> list[dict]:
        if not self.stub_log.exists():
            return []
        return [json.loads(line) for line in self.stub_log.read_text().splitlines() if line]

    def closed_since(self, before: int, deadline_s: float = 20.0) -> list[dict]:
        """The stub's events since index ``before`` once every session opened since then is
        closed (a server may end a stopped session after its last round)."""
        end = time.monotonic() + deadline_s
        while True:
            events = self.events()[before:]
            kinds = [e["event"] for e in events]
            if kinds.count("open") == kinds.count("close") or time.monotonic() > end:
                return events
            time.sleep(0.1)


def start_server(ck: support.Checkout, cmd: list[str], *, cwd: Path, stub_path: str, port: int,
                 tmp: Path, env: dict[str, str] | None = None, deadline_s: float = 120.0,
                 ready_path: str | None = None) -> Server:
    """The author's server, our stubs first on its path; returns once ``port`` accepts a
    connection and, with ``ready_path``, once a GET of that path answers 200 (a server whose
    routes are added after it listens); fails with the server's log when it exits or the
    deadline passes."""
    server = Server(ck, cmd, cwd=cwd, stub_path=stub_path, tmp=tmp, env=env).__enter__()
    try:
        end = time.monotonic() + deadline_s
        server.wait_port(port, deadline_s)
        if ready_path is not None:
            wait_http_ok(server, f"http://127.0.0.1:{port}{ready_path}", end)
    except BaseException:
        server.stop()
        raise
    return server


def wait_http_ok(server: Server, url: str, end: float) -> None:
    """Until a GET of ``url`` (on 127.0.0.1, no proxy) answers 200; fails with the server's
    log when it exits first or at ``end`` (monotonic)."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    said = "no answer"
    while time.monotonic() < end:
        if server.proc.poll() is not None:
            pytest.fail(f"the server exited ({server.proc.returncode}) before {url} answered:\n"
                        f"{server.tail()}")
        try:
            with opener.open(url, timeout=5.0) as r:
                if r.status == 200:
                    return
                said = f"HTTP {r.status}"
        except urllib.error.HTTPError as e:
            said = f"HTTP {e.code}"
        except OSError as e:
            said = repr(e)
        time.sleep(0.2)
    pytest.fail(f"{url} never answered 200 (last: {said}):\n{server.tail()}")


def user_clip(*turns: tuple[float, float], total: float):
    """A tone (the user speaking) over each (start, seconds), silence elsewhere."""
    parts, at = [], 0.0
    for start, seconds in turns:
        parts += [gap(start - at), tone(seconds)]
        at = start + seconds
    return cat(*parts, gap(total - at))


async def trial(model, tmp: Path, clip, observation_s: float = 1.0):
    """One Direct Replay trial of the real adapter: connect, stream at 1x, close."""
    instance = make_instance(tmp, "take_turn", "immediate", {"user": clip}, {"user_start": 0.0})
    duplex = await StreamingDuplex.open(model, SessionInfo(instance, seed=1))
    try:
        return await DirectReplay(observation_s=observation_s).run(duplex, instance)
    except BaseException:
        duplex._reader.cancel()
        await duplex.session.close()
        raise


@dataclass
class Measured:
    """What one trial showed against the stub's decisions (seconds on the input clock)."""

    onset_err_ms: list[float] = field(default_factory=list)
    stop_err_ms: list[float] = field(default_factory=list)

    def row(self) -> dict:
        """The harness table's columns this trial fills (support.record_row), once the
        test has checked connects, audio and text."""
        med, top = median_max(self.onset_err_ms)
        return {"connects": True, "audio": True, "text": True,
                "barge_in_stop": bool(self.stop_err_ms), "onset_err_ms_median": med,
                "onset_err_ms_max": top, "stop_err_ms": median_max(self.stop_err_ms)[1]}


def against_stub(rec, events: list[dict]) -> Measured:
    """Each stub answer matched to the first output span that starts at or after it (an
    answer's audio cannot precede the decision; 50 ms for the energy gate's frames) and before
    the stub's next answer, however late (lateness is measured, not judged); a stop to the end
    of the span it cut, which must be shorter than a whole answer. Fails naming the decision
    a span is missing for."""
    out = spans(rec.output)
    answers = [e["input_s"] for e in events if e["event"] == "answer"]
    m = Measured()
    for k, at in enumerate(answers):
        until = answers[k + 1] - 0.05 if k + 1 < len(answers) else float("inf")
        match = [s for s in out if at - 0.05 <= s[0] < until]
        assert match, f"no output after the stub answered at {at:.2f} s: {out}"
        start, end = match[0]
        m.onset_err_ms.append((start - at) * 1000)
        stops = [e["input_s"] for e in events if e["event"] == "stop" and at < e["input_s"] < until]
        if stops:
            assert end - start < ANSWER_S - 0.05, f"the answer at {at:.2f} s was not cut: {out}"
            m.stop_err_ms.append((end - stops[0]) * 1000)
    return m


def assert_cut_then_whole(rec) -> None:
    """The native words: what played of the cut answer (a prefix of the sentence), then the
    whole sentence of the answer after it."""
    words, whole = [w.text for w in rec.transcript], SENTENCE.split()
    cut = words[:-len(whole)]
    assert words[len(cut):] == whole and cut == whole[:len(cut)], words


def median_max(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return round(statistics.median(values), 1), round(max(values), 1)


def most_open_at_once(events: list[dict]) -> int:
    """The most stub sessions open at one time (their ``open`` / ``close`` in log order)."""
    now = most = 0
    for ev in events:
        now += {"open": 1, "close": -1}.get(ev["event"], 0)
        most = max(most, now)
    return most


def stub_path(*extra: Path) -> str:
    return os.pathsep.join(str(p) for p in (*extra, STUBS))
