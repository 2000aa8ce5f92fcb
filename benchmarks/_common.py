"""Shared by the benchmark scripts: the machine's description, a wall + CPU stopwatch, error
statistics, and a larger synthetic dataset made from the bundled fixtures.

Benchmarks run on machines shared with other work, so every timing is taken twice: wall time
(what a user waits) and the process's CPU time (what the work costs one core, mostly immune to
other processes competing for the cores). Throughput "per core" is always the CPU figure.
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.data import audio  # noqa: E402
from pytest_duplexact.data.instance import (  # noqa: E402
    ANNOTATION_FIELDS,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER,
    MANIFEST,
    bundled_root,
)


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def machine() -> dict:
    """What the figures were measured on."""
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_average": load_average()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            info["cpu_model"] = names[0]
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class Clock:
    """Wall and CPU seconds of a ``with`` block."""

    wall: float = 0.0
    cpu: float = 0.0

    def __enter__(self) -> "Clock":
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c


def stats_ms(errors_s, bias_s: float = 0.0) -> dict:
    """|error| statistics in ms (after subtracting ``bias_s``) and the signed median."""
    e = np.asarray([v for v in errors_s if v is not None and np.isfinite(v)], dtype=float)
    if not len(e):
        return {"n": 0, "median": None, "p95": None, "max": None, "signed_median": None}
    a = np.abs(e - bias_s) * 1000
    return {"n": int(len(e)), "median": round(float(np.median(a)), 1),
            "p95": round(float(np.percentile(a, 95)), 1), "max": round(float(a.max()), 1),
            "signed_median": round(float(np.median(e - bias_s)) * 1000, 1)}


# --- a larger dataset from the bundled one ---------------------------------------------------

# Clips that start the session: prepending silence to them shifts every instant of the
# instance. user_* / pause_* / other_* / interrupt_target / backchannel_point are on the user
# clip's clock; cue_start / cue_end are on the cue clip's clock and do not move.
SHIFTED_ROLES = ("user", "lead_in")
USER_CLOCK = tuple(f for f in ANNOTATION_FIELDS if not f.startswith("cue_"))
MAX_SHIFT_S = 1.5


def replicate_dataset(dst: Path, size: int, seed: int = 0, src: Path | None = None) -> Path:
    """Write a dataset of ``size`` instances to ``dst``: the source set (the bundled fixtures by
    default) copied over and over with new ids (``<id>-x<copy>``), each copy's user / lead-in
    clip preceded by a different amount of silence (0.02 to MAX_SHIFT_S s, whole samples) and
    its annotations and timed transcripts moved by the same amount. Other clips are shared."""
    src = Path(src or bundled_root())
    lines = [json.loads(line) for line in (src / MANIFEST).read_text(encoding="utf-8")
             .splitlines() if line.strip()]
    dst = Path(dst)
    (dst / "audio").mkdir(parents=True, exist_ok=True)
    shared = dst / "audio" / "shared"
    if not shared.exists():
        shutil.copytree(src / "audio", shared)
    rng = random.Random(seed)
    out = []
    for k in range(size):
        copy, obj = divmod(k, len(lines))
        obj = json.loads(json.dumps(lines[obj]))  # a deep copy
        new_id = f"{obj['id']}-x{copy:02d}"
        shift_n = int(rng.uniform(0.02, MAX_SHIFT_S) * audio.SAMPLE_RATE)
        shift = shift_n / audio.SAMPLE_RATE
        for role, clip in obj["audio"].items():
            path = clip["path"] if isinstance(clip, str) else clip["path"]
            if role not in SHIFTED_ROLES:
                rel = f"audio/shared/{Path(path).name}"
                if isinstance(clip, str):
                    obj["audio"][role] = rel
                else:
                    clip["path"] = rel
                continue
            x = audio.read(src / path)
            rel = f"audio/{new_id}.{role}.flac"
            audio.write(dst / rel, np.concatenate([np.zeros(shift_n, np.float32), x]))
            clip["path"] = rel
            for w in clip.get("transcript") or ():
                w["start"], w["end"] = round(w["start"] + shift, 7), round(w["end"] + shift, 7)
        if "user" in obj["audio"]:
            for name in USER_CLOCK:
                if name in obj.get("annotations", {}):
                    obj["annotations"][name] = round(obj["annotations"][name] + shift, 7)
        obj["id"] = new_id
        obj.setdefault("synthesis", {})["leading_silence_s"] = shift
        out.append(json.dumps(obj, ensure_ascii=False))
    header = json.loads((src / HEADER).read_text(encoding="utf-8"))
    header.update({"format": FORMAT_NAME, "version": FORMAT_VERSION, "instances": size,
                   "name": f"{header.get('name', 'dataset')}-x{size}",
                   "description": f"benchmark copy of {src}: {size} instances with varied "
                                  "leading silence"})
    header.pop("source", None)
    (dst / HEADER).write_text(json.dumps(header, indent=1) + "\n", encoding="utf-8")
    (dst / MANIFEST).write_text("\n".join(out) + "\n", encoding="utf-8")
    return dst


class TreePeak:
    """The peak resident memory (VmHWM) of a process and its descendants, polled from /proc
    while it runs. ``wait4``'s ``ru_maxrss`` cannot be used: a child spawned (vfork or fork)
    from a large process inherits that process's high-water mark through exec, so a 300 MB
    pytest run started from a 700 MB benchmark reads 700 MB."""

    def __init__(self, pid: int, every_s: float = 0.2):
        import threading

        self.pid, self.every_s = pid, every_s
        self.peak_kb: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        pids, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
        return pids

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._tree():
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            kb = int(line.split()[1])
                            self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), kb)
                except (OSError, ValueError):
                    pass
            self._stop.wait(self.every_s)

    def stop(self) -> dict:
        """{"max": MB of the largest process, "processes": how many were seen}."""
        self._stop.set()
        self._thread.join()
        kb = self.peak_kb.values()
        return {"max_mb": round(max(kb, default=0) / 1024, 1), "processes": len(self.peak_kb)}


def plugin_run(model: str, dataset: Path, run_dir: Path, log: Path,
               extra: tuple[str, ...] = ()) -> dict:
    """One whole plugin run (``python -m pytest --duplexact-model=MODEL``) in a fresh process;
    the peak resident memory of its largest process (``TreePeak``). ``extra``: more pytest
    arguments."""
    cmd = [sys.executable, "-m", "pytest", f"--duplexact-model={model}",
           f"--duplexact-data={dataset}", f"--duplexact-run-dir={run_dir}", "-q",
           "-p", "no:cacheprovider", "-p", "no:xdist", *extra]
    t = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=run_dir.parent, stdout=out, stderr=subprocess.STDOUT)
    peak = TreePeak(proc.pid)
    code = proc.wait()
    mem = peak.stop()
    if code not in (0, 1):  # 1: the model missed some instances, a valid run
        raise RuntimeError(f"plugin run failed ({code}); see {log}")
    return {"instances": len(list((run_dir / "instances").iterdir())),
            "peak_rss_mb": mem["max_mb"],
            "wall_s": round(time.perf_counter() - t, 1), "exit_status": code}