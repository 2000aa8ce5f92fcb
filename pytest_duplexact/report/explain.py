"""A compact text timeline for failure messages: user speech, cue, the rule's window and the
model's segments as lanes on one clock, plus the segments' transcripts."""

from __future__ import annotations

from pathlib import Path

from ..data.results import InstanceOutcome, flip_text
from ..run.rundir import TIMELINE_FILE, RunDir

WIDTH = 72


def _lane(spans, t0: float, t1: float, ch: str) -> str:
    cells = [" "] * WIDTH
    scale = WIDTH / max(t1 - t0, 1e-9)
    for a, b in spans:
        lo = max(0, min(WIDTH - 1, int((a - t0) * scale)))
        hi = max(lo, min(WIDTH - 1, int((b - t0) * scale - 1e-9)))
        for k in range(lo, hi + 1):
            cells[k] = ch
    return "".join(cells)


def lanes(timeline: dict, window=None, user=()) -> list[str]:
    t1 = max(timeline.get("duration") or 0.0, 1e-3)
    rows = [f"timeline 0 .. {t1:.1f} s ({t1 / WIDTH:.2f} s per column)"]
    if user:
        rows.append(f"  user   |{_lane(user, 0.0, t1, '=')}|")
    cue = timeline.get("cue")
    if cue:
        rows.append(f"  cue    |{_lane([(cue['start'], cue['end'])], 0.0, t1, '^')}|")
    if window:
        rows.append(f"  window |{_lane([tuple(window)], 0.0, t1, '[')}|")
    segs = timeline.get("segments") or []
    rows.append(f"  model  |{_lane([(s['start'], s['end']) for s in segs], 0.0, t1, '#')}|")
    for s in segs[:8]:
        rows.append(f"    {s['start']:6.2f}-{s['end']:6.2f} s  {s['text']!r}")
    if len(segs) > 8:
        rows.append(f"    (+{len(segs) - 8} more segments)")
    return rows


def explain(outcome: InstanceOutcome, run_dir) -> str:
    if not outcome.recording:
        return ""
    run = RunDir(run_dir)
    folder = run.folder(outcome.recording)
    try:
        tl = run.read_timeline(folder)
    except (OSError, ValueError):
        return f"(no timeline at {folder / TIMELINE_FILE})"
    window = outcome.immediate.window if outcome.immediate else None
    rows = lanes(tl, window, [tuple(u) for u in tl.get("user", [])])
    if outcome.immediate is not None and outcome.immediate.is_borderline:
        rows.append("  borderline I: " + "; ".join(
            flip_text(f) for f in outcome.immediate.borderline[:3]))
    rows.append(f"  recording: {Path(run_dir) / outcome.recording}")
    return "\n".join(rows)
