"""The HTML report's timeline lanes of one failed instance: hand-written SVG (small enough
for thousands of failures), from its ``timeline.json`` and outcome."""

from __future__ import annotations

import html

from ...data import taxonomy
from ...data.timeline import count_words

LANES = ("user speech", "cue", "rule window", "model speech (VAD)", "model segments", "events")


def lanes_svg(timeline: dict, outcome: dict, width: int = 900) -> str:
    """The instance's timeline as lanes: user speech, the injected cue, the rule's window,
    raw model speech, the transcribed model segments (backchannels lighter) and the
    pipeline's events; a red line at the rule's onset. Hover a shape for its text."""
    label_w, lane_h, top = 140, 20, 6
    dur = max(float(timeline.get("duration") or 0.0), 1.0)
    plot_w = width - label_w - 10

    def X(t):
        return label_w + plot_w * max(0.0, min(float(t), dur)) / dur

    height = top + lane_h * len(LANES) + 22
    e = html.escape
    parts = [f'<svg class="lanes" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="timeline lanes">']

    def lane_y(name):
        return top + lane_h * LANES.index(name)

    for k, name in enumerate(LANES):
        y = lane_y(name)
        if k % 2 == 0:
            parts.append(f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{lane_h}" '
                         f'fill="#f6f6f6"/>')
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" '
                     f'class="lane-label">{e(name)}</text>')

    def span(name, a, b, color, title, opacity=1.0):
        y = lane_y(name) + 3
        x0, x1 = X(a), X(b)
        parts.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.0):.1f}" '
                     f'height="{lane_h - 6}" fill="{color}" fill-opacity="{opacity}">'
                     f'<title>{e(title)}</title></rect>')

    for a, b in timeline.get("user") or []:
        span("user speech", a, b, "#3b6ea8", f"user speech {a:.2f}-{b:.2f} s")
    cue = timeline.get("cue")
    if cue:
        forced = " (forced)" if cue.get("forced") else ""
        span("cue", cue["start"], cue["end"], "#e08a2e",
             f"cue {cue['start']:.2f}-{cue['end']:.2f} s{forced}")
    imm = outcome.get("immediate") or {}
    if imm.get("window"):
        a, b = imm["window"]
        span("rule window", a, b, "#55a868", f"{outcome['action']} window {a:.2f}-{b:.2f} s",
             0.6)
    for a, b in timeline.get("speech") or []:
        span("model speech (VAD)", a, b, "#888888", f"model speech {a:.2f}-{b:.2f} s")
    for seg in timeline.get("segments") or []:
        words = count_words(seg.get("text"))  # as the rules count them (timeline.py)
        bc = 0 < words <= taxonomy.BACKCHANNEL_MAX_WORDS
        span("model segments", seg["start"], seg["end"], "#c9b3e6" if bc else "#8172b2",
             f"{seg['start']:.2f}-{seg['end']:.2f} s: {seg.get('text') or '(no text)'}")
        x0, x1 = X(seg["start"]), X(seg["end"])
        text = seg.get("text") or ""
        room = int((x1 - x0) / 6)
        if room >= 4:
            short = text if len(text) <= room else text[:room - 1] + "\u2026"
            parts.append(f'<text x="{x0 + 3:.1f}" y="{lane_y("model segments") + 14}" '
                         f'class="seg-text">{e(short)}</text>')
    for t, what in timeline.get("events") or []:
        x = X(t)
        y = lane_y("events")
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y + 3}" y2="{y + lane_h - 3}" '
                     f'stroke="#555555" stroke-width="2"><title>{e(f"{t:.2f} s: {what}")}'
                     f'</title></line>')
    if imm.get("onset") is not None:
        x = X(imm["onset"])
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
                     f'y2="{top + lane_h * len(LANES)}" stroke="#c0392b" stroke-width="1.5" '
                     f'stroke-dasharray="3,2"><title>rule onset {imm["onset"]:.2f} s</title>'
                     f'</line>')
    axis_y = top + lane_h * len(LANES)
    step = next(s for s in (0.5, 1, 2, 5, 10, 20, 60, 120) if dur / s <= 16)
    t = 0.0
    while t <= dur + 1e-9:
        x = X(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis_y}" y2="{axis_y + 4}" '
                     f'stroke="#444444"/><text x="{x:.1f}" y="{axis_y + 15}" '
                     f'text-anchor="middle" class="tick">{t:g}</text>')
        t += step
    parts.append(f'<text x="{label_w - 6}" y="{axis_y + 15}" text-anchor="end" '
                 f'class="tick">seconds</text></svg>')
    return "".join(parts)
