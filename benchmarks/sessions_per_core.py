"""How many live sessions does one machine hold? The plugin end to end at a high concurrency.

For each ``--concurrency`` level, one pytest run of the plugin: gpt-realtime (the real
adapter and openai SDK client) against the fake realtime server (tests/fakes/realtime_server.py,
its own process on 127.0.0.1), over the bundled Direct Replay instances replicated to
``--instances`` (default 1.5 x the level), each copy's user clip padded with its own trailing
silence so that every instance streams a different length and the server's sessions can be
told apart by what they received. Per level:

* onset error p95 (and p50 / max): each scored trial's recorded response onset (energy
  threshold on its output track) against the instant the server sent its first audio delta
  (the server's t = 0 is the first input sample it received);
* trials re-run, and trials ended "timing unreliable" (report.json's ``clock``);
* our CPU per streamed audio second per session: the pytest process (and its scoring
  worker) over every second of audio the server received (every attempt's session); the
  event loop thread's share alone (``measured.loop_cpu_ms_per_stream_s``); the fake
  server's CPU apart, over the same seconds;
* the concurrency the run sustained (``measured.concurrency``: the AIMD cap's p50 / min);
* wall time against the schedule's ideal: the instances' stream lengths packed in order on
  ``concurrency`` lanes (x ``--workers``), as the prefetcher starts them;
* the CPU ceiling: the sessions this machine's cores hold at the CPU both processes (ours
  and the fake's) spent per streamed second, and the wall time over the ideal packed on
  that many lanes (the part of the excess no harness could remove with this fake beside it);
* the machine's load average before and after.

    python -m benchmarks.sessions_per_core                       # 32 and 64
    python -m benchmarks.sessions_per_core --concurrency 128 256  # minutes each, at 1x
    python -m benchmarks.sessions_per_core --concurrency 64 --workers 2   # -n 2: two loops

Prints a table and writes JSON (``--out``). Sends nothing beyond 127.0.0.1; a dummy key.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks._common import machine
from pytest_duplexact.data import audio
from pytest_duplexact.data.instance import HEADER, MANIFEST, bundled_root, load_dataset
from pytest_duplexact.data.recording_io import load_recording
from pytest_duplexact.data.taxonomy import OBSERVATION_PERIOD_S, Pipeline
from pytest_duplexact.rules import requires
from tests.fakes.realtime_server import energy_bounds

ROOT = Path(__file__).resolve().parents[1]
STEP_S = 0.05  # streamed lengths differ by this much: sessions matched within half of it
KEY = "sk-fake-benchmark"  # never a real key against a fake


def padded_dataset(dst: Path, size: int) -> dict[str, float]:
    """``size`` copies of the bundled Direct Replay instances in ``dst``, copy ``j``'s user
    clip padded with trailing silence up to the longest clip + j x STEP_S; {id: seconds its
    trial streams}."""
    src = bundled_root()
    direct = {i.id: i for i in load_dataset(src, requires=requires).instances
              if i.pipeline is Pipeline.DIRECT}
    lines = [json.loads(line) for line in (src / MANIFEST).read_text(encoding="utf-8")
             .splitlines() if line.strip()]
    lines = [obj for obj in lines if obj["id"] in direct]
    longest = max(direct[o["id"]].clips["user"].duration for o in lines)
    (dst / "audio").mkdir(parents=True, exist_ok=True)
    if not (dst / "audio" / "shared").exists():  # the other clips, as they are
        shutil.copytree(src / "audio", dst / "audio" / "shared")  # no symlink: refused
    out, lengths = [], {}
    for j in range(size):
        obj = json.loads(json.dumps(lines[j % len(lines)]))
        x = audio.read(src / obj["audio"]["user"]["path"])
        total = int(round((longest + j * STEP_S) * audio.SAMPLE_RATE))
        new_id = f"{obj['id']}-p{j:03d}"
        obj["id"] = new_id
        for role, clip in obj["audio"].items():
            if role == "user":
                clip["path"] = f"audio/{new_id}.user.flac"
                audio.write(dst / clip["path"],
                            np.concatenate([x, np.zeros(total - len(x), np.float32)]))
            else:
                clip["path"] = f"audio/shared/{Path(clip['path']).name}"
        out.append(json.dumps(obj, ensure_ascii=False))
        lengths[new_id] = total / audio.SAMPLE_RATE + OBSERVATION_PERIOD_S
    header = json.loads((src / HEADER).read_text(encoding="utf-8"))
    header.update({"instances": size, "name": f"direct-replay-padded-x{size}",
                   "description": "benchmark copy: bundled Direct Replay instances, each "
                                  "with its own trailing silence"})
    header.pop("source", None)
    (dst / HEADER).write_text(json.dumps(header, indent=1) + "\n", encoding="utf-8")
    (dst / MANIFEST).write_text("\n".join(out) + "\n", encoding="utf-8")
    return lengths


def ideal_wall(lengths: list[float], lanes: int) -> float:
    """The instances' lengths packed in order on ``lanes``: each starts as a lane frees."""
    free = [0.0] * max(1, lanes)
    for s in lengths:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


class Child:
    """A child process whose CPU (user + system, its own waited-for children included) is
    read when it ends (os.wait4)."""

    def __init__(self, cmd: list[str], **kw):
        self.proc = subprocess.Popen(cmd, **kw)
        self.cpu_s: float | None = None

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.cpu_s = ru.ru_utime + ru.ru_stime
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                return self.proc.returncode
            time.sleep(0.2)
        self.proc.kill()
        self.proc.wait()
        raise TimeoutError(f"{self.proc.args[:3]} did not end within {timeout:.0f} s")


def start_server(log: Path, script: dict) -> tuple[Child, str]:
    server = Child([sys.executable, str(ROOT / "tests" / "fakes" / "realtime_server.py"),
                    "--script", json.dumps(script), "--log", str(log),
                    # its full collections (its record of every append grows with the run:
                    # 33-405 ms pauses at 128) would delay its clock's start and its answers,
                    # onset errors that are the fake's, not the harness's
                    "--gc-off"],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = server.proc.stdout.readline()  # the fake prints its port first, then serves
    if not line.startswith("PORT "):
        server.proc.kill()
        raise RuntimeError(f"the fake realtime server did not start: {line!r}")
    return server, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def match(sessions: list[dict], streamed: dict[str, float]) -> dict[str, dict]:
    """Each scored trial's server session: the one whose input is its length (within half a
    step). A trial with none, or more than one (a stopped attempt of another instance
    that happened to end there), is left out."""
    by_len = {}
    for s in sessions:
        if s.get("t0_monotonic") is not None:
            by_len.setdefault(round(s["input_ms"] / 1000 / STEP_S), []).append(s)
    out = {}
    for iid, secs in streamed.items():
        near = [s for k in (round(secs / STEP_S) + d for d in (-1, 0, 1))
                for s in by_len.get(k, []) if abs(s["input_ms"] / 1000 - secs) < STEP_S / 2]
        if len(near) == 1:
            out[iid] = near[0]
    return out


def stats_ms(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "max": None, "n": 0}
    signed = np.array(values) * 1000
    a = np.abs(signed)
    return {"signed_p50": round(float(np.percentile(signed, 50)), 1),  # + : recorded late
            "p50": round(float(np.percentile(a, 50)), 1),
            "p95": round(float(np.percentile(a, 95)), 1), "max": round(float(a.max()), 1),
            "n": int(len(a))}


def one_level(concurrency: int, n: int, args, work: Path) -> dict:
    # a level given twice (--concurrency 128 128) gets folders of its own: a run folder
    # already there would be refused
    tag, k = str(concurrency), 1
    while (work / f"run{tag}").exists():
        k += 1
        tag = f"{concurrency}-{k}"
    data, run, home = work / f"data{n}", work / f"run{tag}", work / "home"
    home.mkdir(exist_ok=True)
    lengths = padded_dataset(data, n)
    script = {"answer_after_ms": args.answer_ms, "speak_s": args.speak_s, "pace": 4.0}
    server, base_url = start_server(work / f"server{tag}.json", script)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "DUPLEXACT_"))}
    env.update(OPENAI_API_KEY=KEY, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--duplexact-model=gpt-realtime", f"--duplexact-data={data}",
           f"--duplexact-model-option=base_url={base_url}",
           f"--duplexact-concurrency={concurrency}", f"--duplexact-run-dir={run}",
           "--duplexact-progress=off", *(["-n", str(args.workers)] if args.workers > 1 else [])]
    load = [round(os.getloadavg()[0], 2)]
    t0 = time.monotonic()
    log = work / f"pytest{tag}.log"
    try:
        with open(log, "w") as f:
            pytest = Child(cmd, cwd=home, env=env, stdout=f, stderr=subprocess.STDOUT)
            pytest.wait(args.timeout)
        out = log.read_text()
    finally:
        server.proc.stdin.close()  # it serves until stdin closes, then writes its log
        server.wait(60)
    wall = time.monotonic() - t0
    load.append(round(os.getloadavg()[0], 2))
    report_file = run / "report.json"
    if not report_file.exists():
        raise SystemExit(f"the run at concurrency {concurrency} wrote no report:\n{out[-3000:]}")
    rep = json.loads(report_file.read_text())
    sessions = json.loads((work / f"server{tag}.json").read_text())
    streamed, onsets, unheard = {}, {}, {}
    for inst in rep["instances"]:
        if inst.get("error") or not inst.get("recording"):
            continue
        rec = load_recording(run / inst["recording"])
        streamed[inst["id"]] = len(rec.input) / rec.sample_rate
        bounds = energy_bounds(rec.output, rec.sample_rate)
        onsets[inst["id"]] = None if bounds is None else bounds[0]
        # a response the user's speech cut before any of it played (the server's first
        # delta and its cancel crossed): not in the output, so not the onset's truth
        unheard[inst["id"]] = {m.group(1) for _, what in rec.events
                               if (m := re.fullmatch(r"truncate (\S+) 0ms", what))}
    errors, by_trial = [], []
    for iid, s in match(sessions, streamed).items():
        heard = [r for r in s.get("responses") or [] if r.get("item_id") not in unheard[iid]]
        sent = heard[0].get("audio_start") if heard else None
        if sent is not None and onsets.get(iid) is not None:
            errors.append(onsets[iid] - sent)
            by_trial.append((abs(errors[-1]), iid, round(1000 * errors[-1], 1)))
    # every attempt's session streamed (stopped ones included), as the server received it
    stream_total = sum(s["input_ms"] for s in sessions) / 1000
    kinds = Counter(re.sub(r"\d+(\.\d+)?", "N", i["error"].split(" (")[0])[:100]
                    for i in rep["instances"] if i.get("error"))
    measured, clock = rep.get("measured") or {}, rep.get("clock") or {}
    lanes, streams = concurrency * max(1, args.workers), list(lengths.values())
    ideal = ideal_wall(streams, lanes)
    # what the machine's cores hold at the CPU both sides spent per streamed second, and the
    # ideal at that many lanes: the part of the wall time over the ideal that no harness
    # could remove on this machine with this fake beside it
    spent = (pytest.cpu_s + server.cpu_s) / stream_total if stream_total else None
    ceiling = int((os.cpu_count() or 1) / spent) if spent else None
    at_ceiling = ideal_wall(streams, min(lanes, ceiling)) if ceiling else None
    return {
        "concurrency": concurrency, "workers": args.workers, "instances": n,
        "scored": len(streamed), "errors": rep["totals"]["errors"],
        "unreliable": clock.get("unreliable", 0), "rerun": clock.get("rerun", 0),
        "onset_error_ms": stats_ms(errors), "unmatched": len(streamed) - len(errors),
        # the worst trials, to look up in the run (their recordings and events)
        "worst_onsets_ms": [{"instance": iid, "error_ms": e}
                            for _, iid, e in sorted(by_trial, reverse=True)[:5]],
        "pytest_cpu_ms_per_stream_s": round(1000 * pytest.cpu_s / stream_total, 1)
        if stream_total else None,
        "loop_cpu_ms_per_stream_s": measured.get("loop_cpu_ms_per_stream_s"),
        "server_cpu_ms_per_stream_s": round(1000 * server.cpu_s / stream_total, 1)
        if stream_total else None,
        "sustained": measured.get("concurrency"),
        "wall_s": measured.get("wall_s"), "process_wall_s": round(wall, 1),
        "ideal_s": round(ideal, 1),
        "wall_over_ideal": round(measured["wall_s"] / ideal, 2) if measured.get("wall_s")
        else None,
        "cpu_ceiling_sessions": ceiling,
        "ideal_at_ceiling_s": round(at_ceiling, 1) if at_ceiling else None,
        "wall_over_ideal_at_ceiling": round(measured["wall_s"] / at_ceiling, 2)
        if at_ceiling and measured.get("wall_s") else None,
        "load_1m": load, "exit_status": pytest.proc.returncode,
        "stream_s_total": round(stream_total, 1), "sessions": len(sessions),
        "error_kinds": dict(kinds),
    }


def table(levels: list[dict]) -> str:
    rows = ["| concurrency | instances | onset error p50 / p95 / max ms (n) | unreliable "
            "(re-run) | errors | pytest CPU / loop CPU / server CPU ms per stream s | "
            "sustained p50 / min | wall / ideal s | CPU ceiling (wall / its ideal) | "
            "load 1m |", "|" + "---|" * 10]
    for lv in levels:
        e, s = lv["onset_error_ms"], lv["sustained"] or {}
        conc = f"{lv['concurrency']}" + (f" x {lv['workers']}" if lv["workers"] > 1 else "")
        rows.append(
            f"| {conc} | {lv['instances']} | {e['p50']} / {e['p95']} / {e['max']} ({e['n']}) | "
            f"{lv['unreliable']} ({lv['rerun']}) | {lv['errors']} | "
            f"{lv['pytest_cpu_ms_per_stream_s']} / {lv['loop_cpu_ms_per_stream_s']} / "
            f"{lv['server_cpu_ms_per_stream_s']} | {s.get('sustained_p50')} / "
            f"{s.get('sustained_min')} | {lv['wall_s']} / {lv['ideal_s']} "
            f"({lv['wall_over_ideal']}) | {lv['cpu_ceiling_sessions']} "
            f"({lv['wall_over_ideal_at_ceiling']}) | {lv['load_1m'][0]}-{lv['load_1m'][1]} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--instances", type=int, default=None,
                        help="instances per level (default: 1.5 x its concurrency x workers)")
    parser.add_argument("--workers", type=int, default=1,
                        help="pytest-xdist processes (-n), each with its own event loop")
    parser.add_argument("--answer-ms", type=float, default=400.0)
    parser.add_argument("--speak-s", type=float, default=0.8)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per level")
    parser.add_argument("--out", type=Path, default=ROOT / "duplexact-runs" / "benchmarks"
                        / "sessions_per_core.json")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep the runs (report, recordings) and server logs in DIR")
    args = parser.parse_args()
    if any(c < 1 for c in args.concurrency):
        parser.error("--concurrency: each level must be at least 1")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    levels = []
    if args.keep is not None:
        try:
            args.keep.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            parser.error(f"--keep {args.keep}: cannot make that folder ({e.strerror}); "
                         "give a folder you can write")
    with (contextlib.nullcontext(str(args.keep)) if args.keep is not None else
          tempfile.TemporaryDirectory(prefix="duplexact-spc-")) as work:
        for c in args.concurrency:
            n = args.instances or int(1.5 * c * max(1, args.workers))
            levels.append(one_level(c, n, args, Path(work)))
            print(table(levels[-1:]).splitlines()[-1], flush=True)
    result = {"benchmark": "sessions_per_core", "machine": machine(),
              "answer_after_ms": args.answer_ms, "speak_s": args.speak_s, "levels": levels}
    print(table(levels))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
