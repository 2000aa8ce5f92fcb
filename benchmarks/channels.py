"""Channels (docs/channels.md): what each costs, and what each does to the endpoint baseline.

    python -m benchmarks.channels [DIR]      # cost, then the runs (about 10 min on 2 cores)
    python -m benchmarks.channels cost       # only the cost of each channel

DIR keeps the runs (a run whose report is there already is not run again); default a
temporary folder.

1. Cost: CPU seconds per audio second of each channel's chain over 30 s of a bundled user
   clip looped, fed 40 ms at a time (a streaming session's pushes, the simulator's) and whole
   (a stepped Direct Replay's one push), best of 3; then, in part 2, the CPU of each whole
   endpoint run over the bundled set per audio second of its trials (the run's process:
   model, channel, VAD, scoring, files), clean and channelled.
2. Robustness: the endpoint baseline over the whole bundled set under every channel of
   CHANNELS (serial runs in a scratch folder), the action x channel I rates with their 95%
   Wilson intervals, the paired comparison against the clean run (McNemar, Holm; ``*`` marks
   a significant drop) and the flips; then latency p10 / p50 / p90 and no-response rates for
   oracle and endpoint, clean. Printed as Markdown (the tables in docs/channels.md).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from pytest_duplexact.data import taxonomy  # noqa: E402
from pytest_duplexact.pipelines import channel as ch  # noqa: E402

CHANNELS = ("clean", "noise:white@10", "noise:pink@10", "noise:babble@10", "noise:cafe@10",
            "noise:babble@0", "phone", "room:0.6", "echo:-6@50", "echo:-20@50",
            "phone+noise:babble@10")


def user_audio(seconds: float = 30.0) -> np.ndarray:
    from pytest_duplexact.data.instance import bundled_root, load_dataset
    from pytest_duplexact.rules import requires

    ds = load_dataset(bundled_root(), requires=requires)
    clip = next(i for i in ds.instances if "user" in i.clips).clip("user").load()
    return np.resize(clip, int(seconds * 16000)).astype(np.float32)


def cost() -> dict[str, tuple[float, float, float]]:
    """spec -> (CPU s per audio s in 40 ms pushes, whole, making its noise loop once)."""
    x = user_audio()
    played = np.roll(x, 8000) * 0.5
    out = {}
    for spec in CHANNELS[1:]:
        channel = ch.parse(spec)
        ch.noise_loop.cache_clear()
        t = time.process_time()
        channel.open(1, ch.active_level(x), ch.track_source(played))
        setup = time.process_time() - t
        per = []
        for step in (640, len(x)):
            best = float("inf")
            for _ in range(3):
                t = time.process_time()
                chain = channel.open(1, ch.active_level(x), ch.track_source(played))
                for i in range(0, len(x), step):
                    chain.process(x[i: i + step])
                best = min(best, time.process_time() - t)
            per.append(best / (len(x) / 16000))
        out[spec] = (per[0], per[1], setup)
    return out


def run(model: str, channel: str, folder: Path) -> tuple[dict, float | None]:
    """One plugin run over the bundled set; its report and its CPU seconds (None: kept from
    an earlier invocation)."""
    if (folder / "report.json").is_file():
        return json.loads((folder / "report.json").read_text()), None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--duplexact-model={model}", f"--duplexact-channel={channel}",
                    f"--duplexact-run-dir={folder}"], cwd=folder.parent, env=env,
                   capture_output=True, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads((folder / "report.json").read_text()), cpu


def audio_seconds(run_dir: Path) -> float:
    import soundfile as sf

    return sum(sf.info(str(p)).duration for p in run_dir.glob("instances/*/input.flac"))


def robustness(scratch: Path) -> None:
    from pytest_duplexact.report.model import Report
    from pytest_duplexact.report.sections import baseline
    from pytest_duplexact.report.stats import rate_of

    reports, cpus = {}, {}
    for spec in CHANNELS:
        folder = scratch / f"endpoint-{spec.replace(':', '_').replace('+', '_')}"
        reports[spec], cpus[spec] = run("endpoint", spec, folder)
        secs = audio_seconds(folder)
        if cpus[spec] is not None:
            print(f"endpoint {spec}: {cpus[spec]:.1f} s CPU for {secs:.0f} s of trials "
                  f"({cpus[spec] / secs * 1000:.1f} ms CPU per audio second)", flush=True)
    clean = Report.from_json(reports["clean"])
    actions = [a for a in taxonomy.ACTIONS if a in clean.summary.actions]
    print("\n| channel | " + " | ".join(taxonomy.ACTION_LABELS[a] for a in actions)
          + " | flips (to failure / to success) |")
    print("|" + " --- |" * (len(actions) + 2))
    for spec in CHANNELS:
        rep = Report.from_json(reports[spec])
        sig = set()
        flips = (0, 0)
        if spec != "clean":
            section = baseline.compare(rep, clean, 0.05, "clean")
            sig = {r["target"] for r in section["comparisons"] if r.get("dropped")}
            worse = sum(1 for f in section["flips"] if f["direction"] == "success->failure")
            flips = (worse, len(section["flips"]) - worse)
        cells = []
        for a in actions:
            r = rate_of(rep.summary.counts(a), "I")
            if r.value is None:
                cells.append("n/a")
                continue
            lo, hi = r.interval
            mark = "*" if f"{a}.I" in sig else ""
            cells.append(f"{100 * r.value:.0f}{mark} [{100 * lo:.0f}, {100 * hi:.0f}] "
                         f"({r.n})")
        tail = "" if spec == "clean" else f"{flips[0]} / {flips[1]}"
        print(f"| `{spec}` | " + " | ".join(cells) + f" | {tail} |")
    for model in ("oracle", "endpoint"):
        rep = reports["clean"] if model == "endpoint" else \
            run("oracle", "clean", scratch / "oracle-clean")[0]
        print(f"\n{model}, clean: latency (s) p10 / p50 / p90 (n); no response")
        for a in actions:
            lat = Report.from_json(rep).summary.latency(a)
            if lat and (lat["n"] or lat["trials"]):
                p = "/".join("-" if lat[k] is None else f"{lat[k]:.2f}"
                             for k in ("p10", "p50", "p90"))
                print(f"  {a}: {p} ({lat['n']}); no response {lat['silent']}/{lat['trials']}")


def main(argv: list[str]) -> int:
    costs = cost()
    print("channel cost, CPU ms per audio second: 40 ms pushes, whole; making its noise "
          "loop (once per run and kind, up to 4 loops), ms")
    for spec, (chunked, whole, setup) in costs.items():
        print(f"  {spec:24s} {chunked * 1000:7.2f} {whole * 1000:7.2f} {setup * 1000:8.1f}")
    if argv[:1] == ["cost"]:
        return 0
    if argv:
        Path(argv[0]).mkdir(parents=True, exist_ok=True)
        robustness(Path(argv[0]).resolve())
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        robustness(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
