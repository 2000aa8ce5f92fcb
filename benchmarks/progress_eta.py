"""How right is the live progress's time left (``--duplexact-progress``, spend/pace.py)?

1. Simulated: the bundled 72 instances at concurrency 1-8, reported in order, under several
   slowdowns, overheads and jitters (tests/spend/pace_sim.py): the relative error of the
   time left at the halfway point, and the worst between a quarter and three quarters.
2. ``--real``: one real streaming run, gpt-realtime against the fake realtime server on
   127.0.0.1 (tests/fakes/realtime_server.py) at ``--concurrency``, in ``lines`` mode; each
   progress line is timestamped as it arrives and its time left compared with when the run's
   last instance was in fact reported. ``--limit 3`` streams all 72 (~5-8 min at 4 in flight).

    python -m benchmarks.progress_eta [--real] [--limit 1] [--concurrency 4]

Sends nothing beyond 127.0.0.1; uses a dummy key.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.data.instance import bundled_root, load_dataset  # noqa: E402
from pytest_duplexact.rules import requires  # noqa: E402
from pytest_duplexact.spend.pace import weight  # noqa: E402
from tests.spend.pace_sim import at_halfway, eta_errors  # noqa: E402
from tests.support.servers import child  # noqa: E402

CASES = {"steady": dict(), "1.3x + 2 s scoring, +-50 %": dict(slowdown=1.3, overhead=2,
                                                               jitter=0.5),
         "+-90 %": dict(overhead=0, jitter=0.9), "2x + 5 s, +-30 %": dict(slowdown=2,
                                                                          overhead=5,
                                                                          jitter=0.3),
         "steady, 60 s start": dict(startup=60), "+-50 %, 300 s start": dict(jitter=0.5,
                                                                          startup=300)}
LINE = re.compile(r"duplexact (\d+)/(\d+).*?(?:~(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)? left)")


def simulated() -> None:
    work = [weight(i) for i in load_dataset(bundled_root(), requires=requires).instances]
    print(f"simulated: {len(work)} instances, {sum(work):.0f} s of audio; relative error of "
          "the time left at half the wall time (worst from a quarter to three quarters of "
          "the instances), worst over seeds 0-4")
    print(f"{'case':28s}" + "".join(f"{'c=' + str(c):>18s}" for c in (1, 2, 4, 8)))
    for name, kw in CASES.items():
        cells = []
        for lanes in (1, 2, 4, 8):
            half = max(at_halfway(work, lanes, seed=s, **kw) for s in range(5))
            mid = max(abs(said - t) / t for s in range(5)
                      for _, said, t in eta_errors(work, lanes, seed=s, **kw)[18:54])
            cells.append(f"{100 * half:7.1f}% ({100 * mid:5.1f}%)")
        print(f"{name:28s}" + "".join(f"{c:>18s}" for c in cells))


def _seconds(m) -> float:
    h, mi, s = (int(x) if x else 0 for x in m.group(3, 4, 5))
    return 3600 * h + 60 * mi + s


def real(limit: int, concurrency: int) -> None:
    speech = ROOT / "pytest_duplexact" / "models" / "assets" / "response.flac"
    script = json.dumps({"speech_file": str(speech), "speak_s": 3.0, "answer_after_ms": 300,
                         "text": "Sure, I can help you with that right away today."})
    with child("realtime_server.py", "--script", script) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-test-progress-0123456789",
               "OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1", "PYTHONPATH": str(ROOT)}
        env.pop("CI", None)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pytest", "--duplexact-model=gpt-realtime",
                   f"--duplexact-limit={limit}", f"--duplexact-concurrency={concurrency}",
                   "--duplexact-progress=lines", "--duplexact-timing-tolerance=off",
                   f"--duplexact-run-dir={tmp}/run", "-p", "no:cacheprovider", "-q"]
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, text=True)
            seen = []
            for line in proc.stdout:
                m = LINE.search(line)
                if m:
                    seen.append((time.monotonic(), int(m.group(1)), int(m.group(2)),
                                 _seconds(m)))
            proc.wait(timeout=60)
    end = seen[-1][0]  # the final line: written as the last instance was reported
    print(f"real: gpt-realtime vs the fake server, {seen[-1][2]} instances at concurrency "
          f"{concurrency}; each progress line: done, time left said, truth, error")
    for t, done, total, said in seen[:-1]:
        truth = end - t
        print(f"  {done:3d}/{total}  said {said:6.0f} s  truth {truth:6.0f} s  "
              f"error {100 * abs(said - truth) / max(truth, 1e-9):5.1f}%")
    half = next(((said, end - t) for t, done, total, said in seen[:-1]
                 if done >= total / 2), None)
    if half:
        print(f"  at the first line past half the instances: "
              f"{100 * abs(half[0] - half[1]) / half[1]:.1f}% off (said {half[0]:.0f} s, "
              f"took {half[1]:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real", action="store_true", help="also one real streaming run")
    ap.add_argument("--limit", type=int, default=1, help="instances per condition (real)")
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    simulated()
    if args.real:
        real(args.limit, args.concurrency)


if __name__ == "__main__":
    main()
