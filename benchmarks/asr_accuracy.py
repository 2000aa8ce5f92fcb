"""How well does the offline transcriber (transcribe_offline.py) hear the bundled fixtures?

Every clip of the bundled fixtures with a timed transcript (each file once) goes through the
timeline's own path: VAD, merge, then the transcriber on each segment's padded audio
(segmentation.transcribe_segments). Each segment's reference text is the clip transcript's
words whose midpoints fall in it (segmentation.assign_words). Reports per clip role and
overall:

* word error rate: (substitutions + deletions + insertions) / reference words, on lowercased
  tokens with punctuation removed (the tokens timeline.count_words counts); and again with
  numbers 0-999 spelled out ("30" = "thirty"), since Whisper writes digits;
* word-count agreement per segment: exact count match, and agreement of the backchannel
  (<= 3 words) / substantive (> 3) classification the rules use;
* word onsets: |hypothesis - reference| start of each word matched by text (difflib on the
  lowercased tokens), p50 / p90;
* speed: segment audio seconds per second of transcription, CPU seconds per audio second
  (process time, every thread), and the model load time.

    python -m benchmarks.asr_accuracy [--dataset DIR] [--beams 1 2 5] [--model DIR] [--json OUT]
        [--noise clean white-35 babble-35 codec] [--roles reference recovery backchannel]
    python -m benchmarks.asr_accuracy --transcribers tiny.en base [--threads 1]

``--transcribers``: compare the offline transcribers by name (transcribe.py BUILTINS), one
table row each (``base`` needs the asr-base extra; a name that cannot load is reported and
skipped).

``--noise``: each clip under these conditions of the noise grid (pytest_duplexact/degrade.py,
seeded by the clip's index) before the VAD and the transcriber; ``--roles``: only these clip
roles. A part of benchmarks/harness_performance.py (``asr``) through ``noise_grid``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.taxonomy import BACKCHANNEL_MAX_WORDS
from pytest_duplexact.data.timeline import count_words
from pytest_duplexact.listen import degrade, vad
from pytest_duplexact.listen.segmentation import (
    MERGE_GAP_S,
    assign_words,
    merge_spans,
    transcribe_segments,
)
from pytest_duplexact.listen.transcribe import get_transcriber
from pytest_duplexact.listen.transcribe_offline import OfflineTranscriber, TranscriberUnavailable
from pytest_duplexact.rules import requires

_TOKEN = re.compile(r"\w[\w']*(?:[-.][\w']+)*")


_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth",
            "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}


def spell(n: int) -> list[str]:
    """0-999 in words ("500" -> five hundred), so "thirty" and "30" are one word."""
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        return [_TENS[n // 10]] + (spell(n % 10) if n % 10 else [])
    return spell(n // 100) + ["hundred"] + (spell(n % 100) if n % 100 else [])


def ordinal(words: list[str]) -> list[str]:
    last = words[-1]
    last = _ORDINAL.get(last, last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return words[:-1] + [last]


def tokens(text: str, spell_numbers: bool = False) -> list[str]:
    out = []
    for t in _TOKEN.findall(text or ""):
        t = t.lower().strip(".")
        m = re.fullmatch(r"(\d{1,3})(st|nd|rd|th)?", t) if spell_numbers else None
        out += (ordinal(spell(int(m[1]))) if m[2] else spell(int(m[1]))) if m else [t]
    return out


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions, deletions, insertions all cost 1)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def clips_with_transcripts(root: Path):
    seen = {}
    for inst in load_dataset(root, requires=requires).instances:
        for role, clip in inst.clips.items():
            if clip.transcript and clip.path not in seen:
                seen[clip.path] = (role, clip)
    return [seen[p] for p in sorted(seen)]


def run(root: Path, transcriber: OfflineTranscriber, log=None, condition: str = "clean",
        roles=None):
    by_role: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    onsets: dict[str, list] = defaultdict(list)
    pairs = []
    for k, (role, clip) in enumerate(clips_with_transcripts(root)):
        if roles and role not in roles:
            continue
        x = degrade.apply(condition, clip.load(), seed=k)
        segments = merge_spans(vad.speech_spans(x, vad.VAD_SAMPLE_RATE), MERGE_GAP_S)
        assigned = assign_words(segments, clip.transcript)
        refs = assigned.texts()
        t0, c0 = time.perf_counter(), time.process_time()
        hyp_words = transcribe_segments(x, vad.VAD_SAMPLE_RATE, segments, transcriber)
        spent, cpu = time.perf_counter() - t0, time.process_time() - c0
        hyps = [" ".join(w.text for w in ws) for ws in hyp_words]
        errs = [e for r, h in zip(assigned.words, hyp_words) for e in onset_errors(r, h)]
        for key in (role, "all"):
            t = by_role[key]
            t["seconds"] += sum(s.duration for s in segments)
            t["asr_s"] += spent
            t["cpu_s"] += cpu
            onsets[key].extend(errs)
            for ref, hyp in zip(refs, hyps):
                r, h = tokens(ref), tokens(hyp)
                t["ref_words"] += len(r)
                t["errors"] += edit_distance(r, h)
                t["errors_spelled"] += edit_distance(tokens(ref, True), tokens(hyp, True))
                t["segments"] += 1
                t["count_exact"] += count_words(ref) == count_words(hyp)
                t["class_agree"] += (count_words(ref) <= BACKCHANNEL_MAX_WORDS) == \
                    (count_words(hyp) <= BACKCHANNEL_MAX_WORDS)
        for ref, hyp in zip(refs, hyps):
            pairs.append((clip.path.name, ref, hyp))
        if log:
            log(f"{clip.path.name}: {' | '.join(hyps)}")
    for key, errs in onsets.items():
        by_role[key]["onset_errors"] = errs
    return by_role, pairs


def onset_errors(ref, hyp) -> list[float]:
    """|start difference| of the reference and hypothesis words matched by their text."""
    r = [" ".join(tokens(w.text)) for w in ref]
    h = [" ".join(tokens(w.text)) for w in hyp]
    out = []
    for block in difflib.SequenceMatcher(a=r, b=h, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            out.append(abs(hyp[block.b + k].start - ref[block.a + k].start))
    return out


def summary(t: dict) -> dict:
    n = max(t["segments"], 1)
    onsets = np.asarray(t.get("onset_errors") or [np.nan])
    return {"segments": int(t["segments"]), "ref_words": int(t["ref_words"]),
            "onset_ms_p50": round(1000 * float(np.nanpercentile(onsets, 50)), 1),
            "onset_ms_p90": round(1000 * float(np.nanpercentile(onsets, 90)), 1),
            "onsets_matched": int(np.isfinite(onsets).sum()),
            "cpu_per_audio_s": t["cpu_s"] / t["seconds"] if t["seconds"] else None,
            "wer": t["errors"] / max(t["ref_words"], 1),
            "wer_numbers_spelled": t["errors_spelled"] / max(t["ref_words"], 1),
            "count_exact": t["count_exact"] / n,
            "class_agree": t["class_agree"] / n,
            "x_realtime": t["seconds"] / t["asr_s"] if t["asr_s"] else None}


def noise_grid(conditions=("clean", "white-35", "babble-35", "codec"),
               roles=("reference", "recovery", "backchannel"), root: Path | None = None,
               transcriber: str | None = None, threads: int = 0) -> dict:
    """<= 3 / > 3 word-class agreement (and WER, exact counts, cost per segment) of the
    offline transcriber (default, or the one named) on the model-voice clips under each
    condition."""
    tr = get_transcriber(transcriber, cpu_threads=threads) if transcriber else \
        OfflineTranscriber(cpu_threads=threads)
    _warm(tr)
    out = {}
    for cond in conditions:
        t0 = time.process_time()
        by_role, _ = run(root or bundled_root(), tr, condition=cond, roles=roles)
        s = summary(by_role["all"])
        s["cpu_s_per_segment"] = round((time.process_time() - t0) / max(s["segments"], 1), 3)
        out[cond] = s
    return out


def noise_lines(r: dict, name: str = "offline") -> list[str]:
    out = [f"\n{name} transcriber on model-voice clips under noise (<= 3 / > 3 word class)"]
    for cond, s in r.items():
        out.append(f"  {cond:<10} segments {s['segments']:>3}: class agree {s['class_agree']:.1%},"
                   f" count exact {s['count_exact']:.1%}, WER {s['wer']:.1%}; "
                   f"{s['cpu_s_per_segment']} CPU s per segment (VAD included)")
    return out


def _warm(tr) -> float:
    t0 = time.perf_counter()
    tr.transcribe(np.zeros(1600, np.float32) + 0.05 * np.sin(np.arange(1600)), 16_000)
    return time.perf_counter() - t0


def compare_transcribers(names, root: Path, threads: int = 0) -> dict:
    """Each named transcriber's summary over every clip with a transcript, plus its load time
    (or why it could not load)."""
    out = {}
    for name in names:
        try:
            tr = get_transcriber(name, cpu_threads=threads)
            load_s = _warm(tr)
        except (TranscriberUnavailable, LookupError, ValueError) as e:
            out[name] = {"unavailable": str(e)}
            continue
        by_role, _ = run(root, tr)
        out[name] = {**summary(by_role["all"]), "load_s": round(load_s, 2),
                     "threads": tr.cpu_threads, "model": tr.name}
    return out


def compare_lines(r: dict) -> list[str]:
    rows = [("transcriber", "WER", "WER (digits spelled)", "count exact", "<=3/>3 agree",
             "onset p50/p90 ms", "CPU s/audio s", "load s")]
    for name, s in r.items():
        if "unavailable" in s:
            rows.append((name, f"not available: {s['unavailable']}", *[""] * 6))
            continue
        rows.append((name, f"{s['wer']:.1%}", f"{s['wer_numbers_spelled']:.1%}",
                     f"{s['count_exact']:.1%}", f"{s['class_agree']:.1%}",
                     f"{s['onset_ms_p50']:.0f} / {s['onset_ms_p90']:.0f}",
                     f"{s['cpu_per_audio_s']:.3f}", f"{s['load_s']:.1f}"))
    first = next(iter(v for v in r.values() if "segments" in v), None)
    head = (f"offline transcribers on the bundled fixtures ({first['segments']} segments, "
            f"{first['ref_words']} reference words)" if first else "no transcriber loaded")
    widths = [max(len(str(row[k])) for row in rows if row[k] or k == 0) for k in range(8)]
    return [head] + ["  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", type=Path, default=None, help="dataset folder (default: bundled)")
    ap.add_argument("--beams", type=int, nargs="+", default=[None], help="beam sizes to compare")
    ap.add_argument("--model", default=None, help="CTranslate2 Whisper folder (default: bundled)")
    ap.add_argument("--show", type=int, default=10, help="list N segments with errors")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--noise", nargs="+", default=None, help="noise-grid conditions")
    ap.add_argument("--roles", nargs="+", default=None, help="only these clip roles")
    ap.add_argument("--transcribers", nargs="+", default=None, metavar="NAME",
                    help="compare these offline transcribers (tiny.en, base); with --noise, "
                         "each under every condition")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args(argv)
    if args.transcribers and not args.noise:
        r = compare_transcribers(args.transcribers, args.dataset or bundled_root(), args.threads)
        print("\n".join(compare_lines(r)))
        if args.json:
            args.json.write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
        return 0
    if args.noise:
        r = {}
        for name in args.transcribers or [None]:
            r[name or "offline"] = grid = noise_grid(
                args.noise, args.roles or ("reference", "recovery", "backchannel"),
                args.dataset, name, args.threads)
            print("\n".join(noise_lines(grid, name or "offline")))
        r = r if args.transcribers else r["offline"]
        if args.json:
            args.json.write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
        return 0
    root = args.dataset or bundled_root()
    results = {}
    for beam in args.beams:
        opts = {} if beam is None else {"beam_size": beam}
        tr = OfflineTranscriber(args.model, **opts)
        t0 = time.perf_counter()
        tr.transcribe(np.zeros(1600, np.float32) + 0.05 * np.sin(np.arange(1600)), 16_000)
        load_s = time.perf_counter() - t0
        by_role, pairs = run(root, tr)
        print(f"\n{tr!r}  threads {tr.cpu_threads}  model load + first call {load_s:.1f} s")
        for role in sorted(by_role, key=lambda r: (r == "all", r)):
            s = summary(by_role[role])
            print(f"  {role:12s} segments {s['segments']:3d}  words {s['ref_words']:4d}  "
                  f"WER {s['wer']:6.1%} ({s['wer_numbers_spelled']:6.1%} digits spelled)  "
                  f"count exact {s['count_exact']:6.1%}  <=3/>3 agree {s['class_agree']:6.1%}  "
                  f"speed {s['x_realtime']:.1f}x real time")
        wrong = [(n, r, h) for n, r, h in pairs if tokens(r) != tokens(h)]
        for name, ref, hyp in wrong[: args.show]:
            print(f"    {name}: ref {ref!r}\n    {' ' * len(name)}  hyp {hyp!r}")
        results[tr.beam_size] = {role: summary(t) for role, t in by_role.items()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
