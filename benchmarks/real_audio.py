"""Our timeline on published real model outputs, against the audio itself and against the
published word timings (tests/realaudio/support.py measures; this prints the table).

Per output: what comes before the speech (digital silence, or the lead-in's peak), the
audio's first loud sample, our first onset and its error, the published first word, published
words that lie over silence, pauses our spans close over quiet audio, and each verdict (take
turn after the user's turn or the interruption, wait through the pause) on our timeline and
on the published words, with whether they agree. Then the summary: |onset error| p50 / p90
(all outputs, and those with a quiet lead-in), verdict agreement where the published words
agree with the audio, pauses closed.

    DUPLEXACT_REALAUDIO_DIR=/path/to/checkouts python -m benchmarks.real_audio \\
        [--transcriber offline] [--json OUT]

The outputs are read where the checkouts hold them and never copied (their licences).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pytest_duplexact.data.results import flip_text
from pytest_duplexact.listen.transcribe import get_transcriber
from tests.realaudio.support import (
    REALAUDIO_ENV,
    SOURCES,
    measure,
    output_folders,
    realaudio_root,
)


def _s(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _pct(values, q) -> str:
    return "-" if not values else f"{np.percentile(values, q):.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=None,
                    help=f"the checkouts' folder (default ${REALAUDIO_ENV})")
    ap.add_argument("--transcriber", default="offline", help="our timeline's transcriber")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args(argv)
    root = args.root or realaudio_root()
    if root is None or not root.is_dir():
        print(f"error: set {REALAUDIO_ENV} (or --root) to a folder holding checkouts of "
              + ", ".join(SOURCES) + " as <owner>+<name>/", file=sys.stderr)
        return 4
    folders = output_folders(root)
    if not folders:
        print(f"error: {root} holds no outputs of " + ", ".join(
            f"{r} (under {u})" for r, u in SOURCES.items()), file=sys.stderr)
        return 4
    transcriber = get_transcriber(args.transcriber)
    rows, errors, quiet_errors, agree, compared, closed = [], [], [], 0, 0, 0
    print(f"{len(folders)} output(s) under {root}; transcriber {args.transcriber}\n")
    header = ("output", "lead-in", "audio onset s", "our onset s", "err ms",
              "published 1st word s", "published over silence", "pauses closed",
              "verdicts (ours / published)")
    table = [header]
    for folder in folders:
        t0 = time.process_time()
        m = measure(folder, transcriber)
        cpu = time.process_time() - t0
        err = m.onset_error_ms
        if err is not None:
            errors.append(abs(err))
            if m.onset.quiet_lead_in:
                quiet_errors.append(abs(err))
        closed += len(m.closed)
        cells = []
        for c, ours, pub in m.verdicts:
            ok = m.comparable(c)
            if ok:
                compared += 1
                agree += ours == pub
            mark = ("agree" if ours == pub else "DIFFER") if ok else "not compared"
            flips = m.borderline.get(c.key) or ()
            border = f", borderline: {flip_text(flips[0])}" if flips else ""
            cells.append(f"{c.key} {ours}/{pub} ({mark}{border})")
        table.append((m.name, m.onset.lead_in(), _s(m.onset.first_loud), _s(m.our_onset),
                      "-" if err is None else f"{err:+.0f}", _s(m.published_onset),
                      ", ".join(f"{w.text!r}@{w.start:.2f}" for w in m.over_silence) or "none",
                      ", ".join(map(str, m.closed)) or "none", "; ".join(cells)))
        rows.append({"output": m.name, "lead_in": m.onset.lead_in(),
                     "quiet_lead_in": m.onset.quiet_lead_in,
                     "audio_onset_s": m.onset.first_loud, "our_onset_s": m.our_onset,
                     "onset_error_ms": err, "published_onset_s": m.published_onset,
                     "published_over_silence": [[w.text, w.start, w.end]
                                                for w in m.over_silence],
                     "closed_pauses": [[p.start, p.end] for p in m.closed],
                     "verdicts": [{"check": c.key, "ours": o, "published": p,
                                   "compared": m.comparable(c),
                                   "borderline": list(m.borderline.get(c.key) or ())}
                                  for c, o, p in m.verdicts],
                     "segments": m.segments, "cpu_s": round(cpu, 2)})
    for r in table:
        print(" | ".join(r))
    print()
    print(f"|onset error| ms p50 / p90: all {_pct(errors, 50)} / {_pct(errors, 90)} "
          f"(n {len(errors)}); quiet lead-in {_pct(quiet_errors, 50)} / "
          f"{_pct(quiet_errors, 90)} (n {len(quiet_errors)})")
    print(f"verdicts agree where the published words agree with the audio: {agree} / "
          f"{compared}")
    print(f"pauses closed over quiet audio: {closed} in {len(folders)} output(s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"root": str(root), "transcriber": args.transcriber,
                                         "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
