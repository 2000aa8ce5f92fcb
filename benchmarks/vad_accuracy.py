"""How close are the timeline's segment edges to where the speech really is?

For every clip of the bundled fixtures that has a timed transcript (reference, recovery,
backchannel, user, lead_in, cue; each file once), runs the VAD and the merge step of
segmentation.py and compares each segment with where the generator placed the phrases. The
placed segments are the transcript's words grouped like the timeline groups speech: words less
than ``merge_gap`` apart are one segment (fixturegen places phrases sample-exactly; docs/
fixtures.md). Reports, per clip role and overall:

* onset / offset error (detected - placed) in ms: median, p95 and max of |error|, and the
  fraction of segments with both edges within 50 ms (the target);
* segments that did not match one-to-one: "boundary" cases, where a placed or detected gap
  is within 50 ms of ``merge_gap`` so either grouping is right within the target (their edges
  are measured on the nearest raw VAD edges), and real splits or merges ("unmatched"); and
  false alarms (a segment overlapping no placed speech);
* VAD speed in multiples of real time: silero's network alone and the whole speech_spans.

Both silero's own edges ("silero") and the refined edges the timeline uses ("refined") are
shown, from the same network pass.

    python -m benchmarks.vad_accuracy [--dataset DIR] [--merge-gap 0.3] [--json OUT] [--worst 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.timeline import Span
from pytest_duplexact.listen import vad
from pytest_duplexact.listen.segmentation import MERGE_GAP_S, merge_spans
from pytest_duplexact.rules import requires

TARGET_MS = 50.0


def placed_segments(words, merge_gap: float) -> list[Span]:
    """The transcript's words grouped like the timeline groups speech. Gaps are compared at
    microsecond precision: the generator places 0.3 s gaps that float arithmetic would
    otherwise read as 0.2999999 s."""
    out: list[Span] = []
    for w in sorted(words, key=lambda w: w.start):
        if out and round(w.start - out[-1].end, 6) < merge_gap:
            out[-1] = Span(out[-1].start, max(out[-1].end, w.end))
        else:
            out.append(Span(w.start, w.end))
    return out


def near_boundary(gaps, merge_gap: float) -> bool:
    return any(abs(g - merge_gap) <= TARGET_MS / 1000 for g in gaps)


@dataclass
class Tally:
    onset_ms: list[float] = field(default_factory=list)
    offset_ms: list[float] = field(default_factory=list)
    boundary: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)
    worst: list[tuple[float, str]] = field(default_factory=list)

    def add(self, clip: str, raw: list[Span], placed: list[Span], merge_gap: float) -> None:
        """Compare one clip. A placed segment that one detected segment matches one-to-one
        is measured on that segment's edges. Otherwise the segment count disagrees; when a
        placed or detected gap lies within 50 ms of ``merge_gap`` either side is right within
        the target (a "boundary" case) and the edges are measured on the nearest raw VAD
        edges; any other disagreement is a real split or merge ("unmatched")."""
        detected = merge_spans(raw, merge_gap)
        for k, p in enumerate(placed):
            hits = [d for d in detected if d.start < p.end and p.start < d.end]
            one_to_one = len(hits) == 1 and not any(
                q is not p and hits[0].start < q.end and q.start < hits[0].end for q in placed)
            if one_to_one:
                start, end = hits[0].start, hits[0].end
            else:
                gaps = [b.start - a.end for a, b in zip(placed, placed[1:])][max(0, k - 1): k + 1]
                inside = [r for r in raw if r.start < p.end + merge_gap and
                          p.start - merge_gap < r.end]
                gaps += [b.start - a.end for a, b in zip(inside, inside[1:])]
                line = (f"{clip}: placed {p} <-> detected "
                        f"{', '.join(map(str, hits)) or 'nothing'}")
                if not (hits and near_boundary(gaps, merge_gap)):
                    self.unmatched.append(line)
                    continue
                self.boundary.append(line)
                start = min((r.start for r in raw), key=lambda t: abs(t - p.start))
                end = min((r.end for r in raw), key=lambda t: abs(t - p.end))
            on, off = (start - p.start) * 1000, (end - p.end) * 1000
            self.onset_ms.append(on)
            self.offset_ms.append(off)
            self.worst.append((max(abs(on), abs(off)),
                               f"{clip}: placed {p}, detected [{start:.3f}, {end:.3f}] "
                               f"(onset {on:+.0f} ms, offset {off:+.0f} ms)"))
        for d in detected:
            if not any(d.start < p.end and p.start < d.end for p in placed):
                self.false_alarms.append(f"{clip}: {d}")

    def summary(self) -> dict:
        on, off = np.abs(self.onset_ms), np.abs(self.offset_ms)
        n = len(on)

        def stats(v, signed):
            if not n:
                return {}
            return {"median_signed": float(np.median(signed)), "median_abs": float(np.median(v)),
                    "p95_abs": float(np.percentile(v, 95)), "max_abs": float(v.max())}

        return {"segments": n, "onset_ms": stats(on, self.onset_ms),
                "offset_ms": stats(off, self.offset_ms),
                "within_50ms": float(np.mean((on <= TARGET_MS) & (off <= TARGET_MS))) if n
                else None,
                "boundary_cases": len(self.boundary), "unmatched": len(self.unmatched),
                "false_alarms": len(self.false_alarms)}


def run(dataset_root: Path, merge_gap: float, params: vad.VadParams):
    ds = load_dataset(dataset_root, requires=requires)
    clips: dict[Path, tuple[str, object]] = {}
    for inst in ds.instances:
        for role, clip in inst.clips.items():
            if clip.transcript and clip.path not in clips:
                clips[clip.path] = (role, clip)
    raw_params = vad.VadParams(threshold=params.threshold, neg_threshold=params.neg_threshold,
                               min_speech_ms=params.min_speech_ms,
                               min_silence_ms=params.min_silence_ms,
                               refine_onset_ms=0, refine_offset_ms=0, attach_ms=0)
    tallies = {"silero": {}, "refined": {}}
    audio_s = net_s = total_s = 0.0
    vad.speech_spans(np.zeros(vad.FRAME * 4, np.float32) + 0.1, vad.VAD_SAMPLE_RATE)  # load
    for path, (role, clip) in sorted(clips.items()):
        x = clip.load()
        audio_s += len(x) / vad.VAD_SAMPLE_RATE
        t0 = time.perf_counter()
        probs = vad.speech_probabilities(x)
        net_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        vad.speech_spans(x, vad.VAD_SAMPLE_RATE, params)  # timed end to end
        total_s += time.perf_counter() - t0
        placed = placed_segments(clip.transcript, merge_gap)
        for kind, p in (("silero", raw_params), ("refined", params)):
            spans = vad.postprocess(x, probs, p)
            raw = [Span(s / vad.VAD_SAMPLE_RATE, e / vad.VAD_SAMPLE_RATE) for s, e in spans]
            for key in (role, "all"):
                tallies[kind].setdefault(key, Tally()).add(path.name, raw, placed, merge_gap)
    speed = {"audio_s": audio_s, "clips": len(clips), "network_x_realtime": audio_s / net_s,
             "speech_spans_x_realtime": audio_s / total_s}
    return tallies, speed


def fmt(s: dict) -> str:
    if not s["segments"]:
        return "no matched segments"
    o, f = s["onset_ms"], s["offset_ms"]
    return (f"n={s['segments']:3d}  onset |err| med {o['median_abs']:5.1f} p95 {o['p95_abs']:6.1f} "
            f"max {o['max_abs']:6.1f}  offset |err| med {f['median_abs']:5.1f} p95 "
            f"{f['p95_abs']:6.1f} max {f['max_abs']:6.1f}  within 50 ms {s['within_50ms']:.0%}  "
            f"boundary {s['boundary_cases']}  unmatched {s['unmatched']}  "
            f"false alarms {s['false_alarms']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", type=Path, default=None, help="dataset folder (default: bundled)")
    ap.add_argument("--merge-gap", type=float, default=MERGE_GAP_S)
    ap.add_argument("--worst", type=int, default=5, help="list the N worst segments")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    root = args.dataset or bundled_root()
    tallies, speed = run(root, args.merge_gap, vad.DEFAULT_PARAMS)
    print(f"dataset {root}  merge_gap {args.merge_gap} s  {speed['clips']} clips, "
          f"{speed['audio_s']:.1f} s of audio  params {vad.DEFAULT_PARAMS}")
    for kind in ("silero", "refined"):
        print(f"\n{kind}:")
        for role, t in sorted(tallies[kind].items(), key=lambda kv: (kv[0] == "all", kv[0])):
            print(f"  {role:12s} {fmt(t.summary())}")
    ref = tallies["refined"]["all"]
    for title, rows in (("boundary case", ref.boundary), ("unmatched", ref.unmatched),
                        ("false alarm", ref.false_alarms)):
        for r in rows:
            print(f"  refined {title}: {r}")
    if args.worst:
        print(f"\nworst {args.worst} refined segments:")
        for _, line in sorted(ref.worst, reverse=True)[: args.worst]:
            print(f"  {line}")
    print(f"\nspeed: silero network {speed['network_x_realtime']:.0f}x real time, whole "
          f"speech_spans {speed['speech_spans_x_realtime']:.0f}x real time (one thread)")
    if args.json:
        out = {"merge_gap": args.merge_gap, "speed": speed,
               **{kind: {role: t.summary() for role, t in by.items()}
                  for kind, by in tallies.items()}}
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
