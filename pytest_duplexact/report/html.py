"""The HTML view of a report: one self-contained page (no network at view time: the charts are
inline SVG drawn with matplotlib, the styles inline, the audio embedded or linked).

Sections (each a ``<section id=...>``): summary, actions (I / S bars with Wilson whiskers),
conditions (the paper's Figure 3 layout), heatmap (follow-through failure 1 - S, Figure 4),
scenarios (Figure 5), timings (stop / interrupt / recover distributions), paper (Table 4 of
the 14 models), baseline (when compared), failures (every failed instance: reason, audio,
timeline lanes).

Reads the JSON report, plus each failed instance's ``timeline.json`` and WAV files from its
run directory when they can be found (next to the report, or the shards' run directories
recorded by ``duplexact merge``).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
from pathlib import Path

from .. import taxonomy
from ..aggregate import NA
from ..recording_io import track_file
from . import markdown as md
from . import paper as paper_data
from .stats import rate_of

AUDIO_MODES = ("embed", "link", "none")
# Failed instances whose audio is embedded (chosen round-robin over conditions, so every
# condition keeps examples); about 50 kB of base64 Ogg Vorbis per instance (two 20 s clips).
DEFAULT_EMBED_LIMIT = 60
# libsndfile's Vorbis compression level (0 best .. 1 smallest): ~8 kbit/s at 16 kHz, clear
# speech, and 5-10x faster to encode than Opus here.
VORBIS_LEVEL = 0.8
SCENARIO_SHORT = {"casual": "C", "meeting": "M", "interview": "I", "customer_service": "S"}
SCENARIO_ORDER = ("casual", "meeting", "interview", "customer_service")  # Figure 5's order
SCENARIO_ROW_MARK = "\u00b7 "  # heat-map rows of this run's scenarios
COLOR = {"I": "#3b6ea8", "S": "#e08a2e", "paper": "#222222"}
ACTION_COLOR = dict(zip(taxonomy.ACTIONS, ("#4c72b0", "#55a868", "#c44e52", "#8172b2",
                                           "#ccb974", "#64b5cd", "#dd8452", "#937860")))
SECTIONS = ("summary", "actions", "conditions", "heatmap", "scenarios", "timings", "paper",
            "baseline", "failures")


class HtmlError(ValueError):
    pass


# --- matplotlib, inline SVG ---------------------------------------------------------------------

def _svg(fig) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "duplexact"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE
    # and the RDF metadata block (license URLs, creator): nothing a reader needs
    return re.sub(r"<metadata>.*?</metadata>", "", text, count=1, flags=re.S)


def _figure(w: float, h: float, **kw):
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    fig = Figure(figsize=(w, h), **kw)
    return fig


def _rate_bars(ax, x, rates, color, width, label):
    vals = [100 * r.value if r.value is not None else 0.0 for r in rates]
    lo = [100 * (r.value - r.lo) if r.value is not None else 0.0 for r in rates]
    hi = [100 * (r.hi - r.value) if r.value is not None else 0.0 for r in rates]
    bars = ax.bar(x, vals, width, color=color, label=label, yerr=[lo, hi], capsize=2.5,
                  error_kw={"elinewidth": 0.9, "ecolor": "#333333"})
    for xi, r in zip(x, rates):
        if r.value is None:
            ax.text(xi, 1.5, "n/a", ha="center", va="bottom", fontsize=6.5, color="#777777",
                    rotation=90)
    return bars


def _style(ax, ylabel="%"):
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)


def actions_chart(report: dict) -> str:
    rows = md.action_rows(report)
    fig = _figure(8.0, 3.0)
    ax = fig.add_subplot()
    x = list(range(len(rows)))
    _rate_bars(ax, [i - 0.19 for i in x], [r["I"] for r in rows], COLOR["I"], 0.38,
               "I (immediate)")
    _rate_bars(ax, [i + 0.19 for i in x], [r["S"] for r in rows], COLOR["S"], 0.38,
               "S (follow-through)")
    ax.set_xticks(x, [f"{r['label']}\nn={r['n']}" for r in rows], fontsize=8)
    _style(ax, "success %")
    ax.legend(fontsize=8, frameon=False, ncols=2, loc="upper center", bbox_to_anchor=(0.5, 1.15))
    return _svg(fig)


def conditions_chart(report: dict) -> str:
    """The paper's Figure 3 for this run: per-condition I (top) and S (bottom) with Wilson
    whiskers, and the paper's mean over its models as a marker."""
    rows = md.condition_rows(report)
    pr = paper_data.load()
    fig = _figure(max(6.0, 0.42 * len(rows) + 1.5), 5.6)
    axes = fig.subplots(2, 1, sharex=True)
    x = list(range(len(rows)))
    for ax, metric in zip(axes, ("I", "S")):
        colors = [ACTION_COLOR[r["action"]] for r in rows]
        rates = [r[metric] for r in rows]
        vals = [100 * r.value if r.value is not None else 0.0 for r in rates]
        err = [[100 * (r.value - r.lo) if r.value is not None else 0 for r in rates],
               [100 * (r.hi - r.value) if r.value is not None else 0 for r in rates]]
        ax.bar(x, vals, 0.7, color=colors, yerr=err, capsize=2,
               error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        for xi, r in zip(x, rates):
            if r.value is None:
                ax.text(xi, 1.5, "n/a", ha="center", va="bottom", fontsize=6,
                        color="#777777", rotation=90)
        means = [pr.condition_mean(r["key"])[0 if metric == "I" else 1] for r in rows]
        px = [xi for xi, m in zip(x, means) if m is not None]
        py = [100 * m for m in means if m is not None]
        ax.plot(px, py, linestyle="none", marker="D", markersize=4, color=COLOR["paper"],
                label="paper: mean over its models (full benchmark)")
        _style(ax, ("Immediate" if metric == "I" else "Subsequent") + " success %")
    axes[0].legend(fontsize=7.5, frameon=False, loc="upper right", bbox_to_anchor=(1, 1.18))
    axes[1].set_xticks(x, [r["label"] for r in rows], rotation=60, ha="right", fontsize=7.5)
    # action names under the groups
    start = 0
    for k in range(1, len(rows) + 1):
        if k == len(rows) or rows[k]["action"] != rows[start]["action"]:
            mid = (start + k - 1) / 2
            axes[0].text(mid, 107, rows[start]["action_label"], ha="center", va="bottom",
                         fontsize=7.5, color=ACTION_COLOR[rows[start]["action"]])
            if k < len(rows):
                for ax in axes:
                    ax.axvline(k - 0.5, color="#cccccc", linewidth=0.6)
            start = k
    return _svg(fig)


def heatmap_rows(report: dict) -> tuple[list[str], list[list[float | None]]]:
    """Rows of the follow-through failure map (1 - S in %, None = not measured): this run
    pooled, this run per scenario, then the paper's models (Table 4's S)."""
    model = report.get("model", "this run")
    acts = report["summary"]["actions"]
    labels, values = [], []

    def row(get):
        return [None if (r := get(a)) is None or r.value is None else 100 * (1 - r.value)
                for a in taxonomy.ACTIONS]

    labels.append(f"{model} (this run)")
    values.append(row(lambda a: rate_of(acts[a]["counts"], "S") if a in acts else None))
    for scen in SCENARIO_ORDER:
        if any(scen in acts[a]["scenarios"] for a in acts):
            labels.append(f"{SCENARIO_ROW_MARK}{taxonomy.SCENARIO_LABELS[scen]}")
            values.append(row(lambda a: rate_of(acts[a]["scenarios"].get(scen), "S")
                              if a in acts else None))
    pr = paper_data.load()
    for m in pr.models:
        labels.append(m.short)
        values.append([None if (c := pr.action(m.name, a)) is None or c["S"] is None
                       else 100 * (1 - c["S"]) for a in taxonomy.ACTIONS])
    return labels, values


def heatmap_chart(report: dict) -> str:
    import numpy as np
    from matplotlib import colormaps

    labels, values = heatmap_rows(report)
    data = np.array([[np.nan if v is None else v for v in r] for r in values], dtype=float)
    fig = _figure(7.2, 0.28 * len(labels) + 1.3)
    ax = fig.add_subplot()
    cmap = colormaps["Reds"].with_extremes(bad="#d9d9d9")
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i, r in enumerate(values):
        for j, v in enumerate(r):
            ax.text(j, i, "\u2014" if v is None else f"{v:.0f}", ha="center", va="center",
                    fontsize=7, color="white" if v is not None and v > 60 else "#222222")
    ax.set_xticks(range(len(taxonomy.ACTIONS)),
                  [taxonomy.ACTION_LABELS[a] for a in taxonomy.ACTIONS], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(labels)), labels, fontsize=7.5)
    n_run = sum(1 for lab in labels if lab.startswith(SCENARIO_ROW_MARK)) + 1
    ax.axhline(n_run - 0.5, color="black", linewidth=1.2)
    bar = fig.colorbar(im, ax=ax, fraction=0.035, pad=0.02)
    bar.set_label("follow-through failure 1 \u2212 S (%)", fontsize=8)
    return _svg(fig)


def scenarios_chart(report: dict) -> str:
    """Figure 5 for one model: per action, per scenario, I and S with Wilson whiskers."""
    acts = report["summary"]["actions"]
    actions = [a for a in taxonomy.ACTIONS if a in acts]
    fig = _figure(max(6.0, 1.25 * len(actions) + 1), 3.2)
    ax = fig.add_subplot()
    ticks, tick_labels = [], []
    x = 0.0
    for a in actions:
        start = x
        for scen in SCENARIO_ORDER:
            c = acts[a]["scenarios"].get(scen)
            if c is None:
                continue
            for metric, dx, marker in (("I", -0.13, "o"), ("S", 0.13, "s")):
                r = rate_of(c, metric)
                if r.value is None:
                    continue
                v = 100 * r.value
                ax.errorbar([x + dx], [v], yerr=[[v - 100 * r.lo], [100 * r.hi - v]],
                            fmt=marker, color=COLOR[metric], markersize=4, capsize=2,
                            elinewidth=0.9)
            ticks.append(x)
            tick_labels.append(SCENARIO_SHORT[scen])
            x += 1
        if x > start:
            ax.text((start + x - 1) / 2, 108, taxonomy.ACTION_LABELS[a], ha="center",
                    fontsize=7.5)
            ax.axvline(x - 0.5, color="#dddddd", linewidth=0.6)
        x += 0.4
    ax.set_xticks(ticks, tick_labels, fontsize=7)
    ax.set_xlim(-0.6, max(x - 0.4, 1))
    _style(ax, "success %")
    ax.plot([], [], "o", color=COLOR["I"], label="Immediate")
    ax.plot([], [], "s", color=COLOR["S"], label="Subsequent")
    ax.legend(fontsize=7.5, frameon=False, ncols=2, loc="upper center",
              bbox_to_anchor=(0.5, 1.22))
    return _svg(fig)


def timing_values(report: dict) -> dict[str, dict[str, list[float]]]:
    """Per timed action, per condition: the instances' timing diagnostics (seconds)."""
    out: dict[str, dict[str, list[float]]] = {}
    for inst in report["instances"]:
        if inst["action"] in taxonomy.TIMING_DIAGNOSTIC and inst.get("timing") is not None \
                and not inst.get("error"):
            out.setdefault(inst["action"], {}).setdefault(inst["condition"], []).append(
                float(inst["timing"]))
    return out


def timings_chart(report: dict) -> str | None:
    values = timing_values(report)
    if not values:
        return None
    pr = paper_data.load()
    actions = [a for a in taxonomy.TIMING_DIAGNOSTIC if a in values]
    widths = [max(2, len(taxonomy.conditions_of(a))) for a in actions]
    fig = _figure(max(5.0, 0.9 * sum(widths) + 1.5), 3.4)
    axes = fig.subplots(1, len(actions), width_ratios=widths, squeeze=False)[0]
    for ax, a in zip(axes, actions):
        conds = [c for c in taxonomy.conditions_of(a)]
        for k, c in enumerate(conds):
            v = sorted(values[a].get(c.id, []))
            if len(v) >= 2:
                ax.boxplot([v], positions=[k], widths=0.5, showfliers=False,
                           medianprops={"color": COLOR["I"]})
            # a deterministic spread instead of random jitter: same page for the same report
            offs = [0.0] if len(v) == 1 else [-0.18 + 0.36 * i / (len(v) - 1)
                                              for i in range(len(v))]
            ax.plot([k + o for o in offs], v, "o", markersize=3, color=COLOR["I"], alpha=0.7)
            paper_medians = [t["median"] for m in pr.models
                             if (t := pr.timing(m.name, c.key)) is not None]
            ax.plot([k + 0.32] * len(paper_medians), paper_medians, "_", markersize=7,
                    color="#999999")
        ax.set_xticks(range(len(conds)), [c.label for c in conds], rotation=45, ha="right",
                      fontsize=7)
        ax.set_xlim(-0.6, len(conds) - 0.4)
        ax.axhline(0, color="#bbbbbb", linewidth=0.6)
        ax.set_title(f"{taxonomy.ACTION_LABELS[a]}\n{TIMING_TITLES[a]}", fontsize=8)
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(axis="y", labelsize=7)
    axes[0].set_ylabel("seconds")
    axes[-1].plot([], [], "o", color=COLOR["I"], label="this run (one dot per instance)")
    axes[-1].plot([], [], "_", color="#999999", markersize=7,
                  label="the paper's models: median per condition (Table 15)")
    fig.legend(fontsize=7.5, frameon=False, loc="lower center", ncols=2,
               bbox_to_anchor=(0.5, 1.0))
    return _svg(fig)


# --- timeline lanes (hand-written SVG: small enough for thousands of failures) --------------

TIMING_TITLES = {"stop": "yield latency", "interrupt": "timing vs target",
                 "recover": "latency after the cue"}
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
        words = len(re.findall(r"[A-Za-z0-9]\S*", seg.get("text") or ""))
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


# --- audio --------------------------------------------------------------------------------------

def audio_data_uri(path: Path) -> str:
    """The WAV as a small base64 data URI: Ogg Vorbis at 16 kHz (~8 kbit/s), or 8 kHz 16-bit
    WAV where this libsndfile cannot encode Vorbis."""
    import soundfile as sf

    from ..audio import resample

    data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    mono = data.mean(axis=1)
    buf = io.BytesIO()
    try:
        x = resample(mono, sr, 16000)
        try:
            sf.write(buf, x, 16000, format="OGG", subtype="VORBIS",
                     compression_level=VORBIS_LEVEL)
        except TypeError:  # soundfile < 0.13: no compression knob
            sf.write(buf, x, 16000, format="OGG", subtype="VORBIS")
        mime = "audio/ogg"
    except (sf.LibsndfileError, ValueError, RuntimeError):
        buf = io.BytesIO()
        sf.write(buf, resample(mono, sr, 8000), 8000, format="WAV", subtype="PCM_16")
        mime = "audio/wav"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def _embed_choice(failed: list[dict], limit: int) -> set[str]:
    """Up to ``limit`` instance ids, round-robin over conditions (taxonomy order)."""
    by_cond: dict[str, list[str]] = {}
    for inst in failed:
        by_cond.setdefault(f"{inst['action']}.{inst['condition']}", []).append(inst["id"])
    order = [c.key for c in taxonomy.CONDITIONS if c.key in by_cond]
    chosen: list[str] = []
    k = 0
    while len(chosen) < limit and any(k < len(by_cond[c]) for c in order):
        for c in order:
            if k < len(by_cond[c]) and len(chosen) < limit:
                chosen.append(by_cond[c][k])
        k += 1
    return set(chosen)


# --- the page -----------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222}
main{max-width:1180px;margin:0 auto;padding:12px 24px 60px}
header{background:#1f3b57;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;opacity:.85}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 24px;
z-index:2;font-size:13px} nav a{margin-right:14px;color:#1f3b57}
section{margin:28px 0} h2{border-bottom:2px solid #1f3b57;padding-bottom:3px;font-size:19px}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}
th{background:#f0f3f6;white-space:normal} td:first-child,th:first-child{text-align:left}
td.l{text-align:left;white-space:normal}
tr.mine td{background:#fff7e0;font-weight:600}
.note{background:#f4f7fb;border-left:4px solid #1f3b57;padding:6px 10px;margin:8px 0}
.warn{background:#fff4f0;border-left:4px solid #c0392b;padding:6px 10px;margin:8px 0}
.pass{color:#1e7b34;font-weight:600} .fail{color:#c0392b;font-weight:600}
.chart svg{max-width:100%;height:auto}
.failure{border:1px solid #ddd;border-radius:4px;margin:14px 0;padding:8px 12px}
.failure h3{margin:0 0 4px;font-size:15px} .failure .reason{margin:2px 0}
.failure audio{height:32px;vertical-align:middle;margin-right:14px}
.lanes{max-width:100%;height:auto;display:block;margin-top:6px}
.lane-label{font-size:11px;fill:#333} .seg-text{font-size:10px;fill:#fff}
.tick{font-size:10px;fill:#444} .muted{color:#777}
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _table(header: list[str], rows: list[list[str]], classes: list[str] | None = None,
           left: set[int] = frozenset()) -> str:
    out = ['<div class="scroll"><table><thead><tr>' + "".join(f"<th>{_esc(h)}</th>" for h in header)
           + "</tr></thead><tbody>"]
    for k, r in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes and classes[k] else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="l">{_esc(v)}</td>' if j in left else f"<td>{_esc(v)}</td>"
            for j, v in enumerate(r)) + "</tr>")
    return "".join(out) + "</tbody></table></div>"


def _chart(svg: str | None, empty: str) -> str:
    return f'<div class="chart">{svg}</div>' if svg else f'<p class="muted">{_esc(empty)}</p>'


def _recording_roots(report: dict, report_path: Path | None, extra) -> list[Path]:
    roots = [Path(p) for p in extra]
    if report_path is not None:
        roots.append(Path(report_path).resolve().parent)
    base = Path(report_path).resolve().parent if report_path is not None else Path.cwd()
    for s in report.get("shards") or []:
        if s.get("run_dir"):
            roots.append(Path(s["run_dir"]))
        roots.append(base / Path(s["report"]).parent.name)  # shard run dirs copied beside
    return roots


def _instance_folder(inst: dict, roots: list[Path]) -> Path | None:
    rel = inst.get("recording")
    if not rel:
        return None
    for root in roots:
        p = root / rel
        if p.is_dir():
            return p
    return None


def _summary(report: dict) -> str:
    s = report.get("settings", {})
    tot = report["totals"]
    rows = [["model", report.get("model")], ["instances", tot["instances"]],
            ["harness / model errors", tot["errors"]],
            ["dataset", f"{s.get('dataset')} (fingerprint "
                        f"{str(s.get('dataset_fingerprint'))[:12]})"],
            ["text judge", s.get("judge") or "none (S not judged except stop)"],
            ["audio judge", s.get("audio_judge") or "none"],
            ["transcriber", s.get("transcriber")], ["simulator", s.get("simulator")],
            ["selection", json.dumps(s.get("selection", {}), sort_keys=True)],
            ["generator", report.get("generator")], ["created", report.get("created")]]
    if report.get("shards"):
        rows.append(["merged from", ", ".join(f"{x['shard']} ({x['instances']})"
                                              for x in report["shards"])])
    out = [_table(["", "value"], [[k, "" if v is None else v] for k, v in rows], left={1})]
    gates = report.get("gates") or []
    if gates:
        out.append("<h3>Gates</h3><ul>" + "".join(
            f'<li class="{"pass" if g["passed"] else "fail"}">{_esc(g["message"])}</li>'
            for g in gates) + "</ul>")
    else:
        out.append('<p class="muted">No gates were set (--duplexact-gate).</p>')
    b = report.get("baseline")
    if b:
        out.append(f'<p class="{"pass" if b["passed"] else "fail"}">{_esc(b["message"])} '
                   '(<a href="#baseline">details</a>)</p>')
    for note in report.get("notes") or []:
        out.append(f'<p class="note">{_esc(note)}</p>')
    out.append('<p class="note">Every rate carries its n and a 95% Wilson interval '
               '[lo\u2013hi]; <b>~</b> marks an interval wider than \u00b110 points: too few '
               'instances to read the rate closely. Whiskers on the charts are the same '
               'intervals.</p>')
    return "".join(out)


def _action_table(report: dict) -> str:
    rows = [[r["label"], md.fmt_rate(r["I"]), r["I"].n, md.fmt_rate(r["S"]), r["S"].n,
             md.fmt_timing(r["timing"]) if r["timed"] else "", r["n"], r["notes"]]
            for r in md.action_rows(report)]
    return _table(["Action", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S",
                   "T median (IQR, n) s", "n", "not in a rate"], rows, left={7})


def _condition_table(report: dict) -> str:
    pr = paper_data.load()
    rows = []
    for r in md.condition_rows(report):
        mi, ms = pr.condition_mean(r["key"])
        paper_cell = f"{md.fmt_rate_value(mi)} / {md.fmt_rate_value(ms)}"
        rows.append([f"{r['action_label']} / {r['label']}", md.fmt_rate(r["I"]), r["I"].n,
                     md.fmt_rate(r["S"]), r["S"].n, r["n"], r["notes"], paper_cell])
    return _table(["Condition", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S", "n",
                   "not in a rate", "paper mean I / S"], rows, left={6})


def _paper_section(report: dict) -> str:
    pr = paper_data.load()
    same = report["totals"]["instances"] == pr.instances
    out = [f'<p class="{"note" if same else "warn"}">{_esc(md.paper_note(report))}</p>']
    mine = {r["action"]: r for r in md.action_rows(report)}
    header = ["Model"] + [taxonomy.ACTION_LABELS[a] + (" I / T / S" if a in
                          taxonomy.TIMING_DIAGNOSTIC else " I / S") for a in taxonomy.ACTIONS]
    rows = [[f"{report.get('model')} (this run)"]
            + [md.run_action_cell(mine.get(a)) for a in taxonomy.ACTIONS]]
    for m in pr.models:
        rows.append([m.name] + [md.paper_cell(pr.action(m.name, a),
                                              a in taxonomy.TIMING_DIAGNOSTIC)
                                for a in taxonomy.ACTIONS])
    out.append(_table(header, rows, ["mine"] + [""] * len(pr.models)))
    out.append('<p class="muted">Table 4 of the paper: I / S in %, T the median timing in '
               'seconds (Stop: yield latency; Interrupt: timing difference; Recover: '
               'recovery latency); \u2013 = not evaluated on Simulator Replay.</p>')
    return "".join(out)


def _baseline_section(b: dict) -> str:
    out = [f'<p class="{"pass" if b["passed"] else "fail"}">{_esc(b["message"])}</p>']
    if b.get("path"):
        out.append(f"<p>Baseline <code>{_esc(b['path'])}</code>: model "
                   f"{_esc(b.get('model'))}, {_esc(b.get('created'))}.</p>")
    out.append(f'<p class="muted">{_esc(b.get("method", ""))}; alpha {b["alpha"]:g}.</p>')
    for w in b.get("warnings", []):
        out.append(f'<p class="warn">{_esc(w)}</p>')
    rows, classes = [], []
    for r in b["comparisons"]:
        rows.append([r["target"], f"{100 * r['baseline']['rate']:.1f} ({r['baseline']['n']})",
                     f"{100 * r['current']['rate']:.1f} ({r['current']['n']})",
                     f"{100 * r['delta']:+.1f}", f"{r['p_value']:.2g}",
                     f"{r['p_adjusted']:.2g}", r["test"],
                     "DROPPED" if r["dropped"] else ("lower, within chance"
                                                     if r["delta"] < 0 else "")])
        classes.append("mine" if r["dropped"] else "")
    if rows:
        out.append(_table(["Comparison", "baseline % (n)", "this run % (n)", "\u0394 points",
                           "p", "p (Holm)", "test", "verdict"], rows, classes))
    for s in b.get("not_compared", []):
        out.append(f'<p class="muted">{_esc(s["target"])}: {_esc(s["why"])}</p>')
    return "".join(out)


def _failures_section(report: dict, roots: list[Path], audio: str, out_dir: Path,
                      embed_limit: int) -> str:
    bad = [i for i in report["instances"] if md.failed(i)]
    if not bad:
        return '<p class="muted">No failed instance.</p>'
    embed = _embed_choice(bad, embed_limit) if audio == "embed" else set()
    out = [f"<p>{len(bad)} failed instance(s): a failed immediate or follow-through verdict, "
           "a judge error or a harness error. Lanes: hover a shape for its times and text; "
           "the dashed red line is the rule's onset.</p>"]
    if audio == "embed" and len(bad) > len(embed):
        out.append(f'<p class="note">Audio embedded for {len(embed)} of {len(bad)} failed '
                   "instances (spread over the conditions); render with audio='link' to "
                   "link every recording instead.</p>")
    missing = 0
    for inst in bad:
        stage, reason = md.failure_reason(inst)
        folder = _instance_folder(inst, roots)
        cond = taxonomy.condition(inst["action"], inst["condition"])
        head = (f'<div class="failure" id="i-{_esc(inst["id"])}"><h3>{_esc(inst["id"])}</h3>'
                f'<p class="muted">{_esc(taxonomy.ACTION_LABELS[inst["action"]])} / '
                f'{_esc(cond.label)} \u00b7 {_esc(inst["scenario"])} \u00b7 '
                f'{_esc(inst["source"])}</p>'
                f'<p class="reason"><b>{_esc(stage)}</b>: {_esc(reason)}</p>')
        parts = [head]
        for other, label in (("immediate", "I"), ("subsequent", "S")):
            r = inst.get(other)
            if r and not stage.startswith(label) and r.get("reason"):
                parts.append(f'<p class="reason muted">{label} ({_esc(r["verdict"])}): '
                             f'{_esc(r["reason"])}</p>')
        if folder is None:
            missing += 1
            parts.append('<p class="muted">recordings not found (looked next to the report '
                         "and in the shards' run directories)</p>")
        else:
            players = []
            for name in ("input", "output"):
                wav = track_file(folder, name)  # input.flac / input.wav
                if not wav.is_file():
                    continue
                if inst["id"] in embed:
                    src = audio_data_uri(wav)
                elif audio == "link":
                    src = Path(os.path.relpath(wav, out_dir)).as_posix()
                else:
                    continue
                preload = "metadata" if inst["id"] in embed else "none"
                players.append(f'<label>{name} <audio controls preload="{preload}" '
                               f'src="{_esc(src)}"></audio></label>')
            if players:
                parts.append("<div>" + "".join(players) + "</div>")
            elif audio == "embed":
                parts.append('<p class="muted">audio not embedded (limit reached)</p>')
            tl = folder / "timeline.json"
            if tl.is_file():
                parts.append(lanes_svg(json.loads(tl.read_text(encoding="utf-8")), inst))
        parts.append("</div>")
        out.append("".join(parts))
    if missing:
        out.insert(1, f'<p class="warn">Recordings of {missing} failed instance(s) were not '
                   "found: render the report from inside its run directory (or pass the run "
                   "directories) to get their audio and timelines.</p>")
    return "".join(out)


def render(report: dict, *, report_path: str | Path | None = None,
           out_path: str | Path | None = None, audio: str = "embed",
           embed_limit: int = DEFAULT_EMBED_LIMIT, recordings=()) -> str:
    """The page as a string. ``audio``: 'embed' (base64 in the page, failed instances only,
    up to ``embed_limit``), 'link' (relative links to the run's WAV files) or 'none'.
    ``recordings``: extra run directories to look for instance folders in."""
    if audio not in AUDIO_MODES:
        raise HtmlError(f"audio must be one of {', '.join(AUDIO_MODES)}, got {audio!r}")
    roots = _recording_roots(report, Path(report_path) if report_path else None, recordings)
    out_dir = Path(out_path).resolve().parent if out_path else Path.cwd()
    model = report.get("model", "?")
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in SECTIONS
                  if s != "baseline" or report.get("baseline"))
    body = [
        f'<section id="summary"><h2>Summary</h2>{_summary(report)}</section>',
        '<section id="actions"><h2>Actions: immediate (I) and follow-through (S)</h2>'
        + _chart(actions_chart(report), "no actions ran") + _action_table(report)
        + "</section>",
        '<section id="conditions"><h2>Conditions (the paper\'s Figure 3 and Table 16)</h2>'
        + _chart(conditions_chart(report) if md.condition_rows(report) else None,
                 "no conditions ran") + _condition_table(report) + "</section>",
        '<section id="heatmap"><h2>Follow-through failure (1 \u2212 S), Figure 4 style</h2>'
        '<p class="muted">This run pooled and per scenario (top rows), then the paper\'s '
        'models per action (Table 4; full benchmark). Gray: no S measured (no immediate '
        'success, or no judge).</p>' + _chart(heatmap_chart(report), "") + "</section>",
        '<section id="scenarios"><h2>Scenarios, Figure 5 style</h2><p class="muted">'
        'C: casual conversation, M: meeting, I: interview, S: customer service; markers are '
        'this run\'s rates, whiskers their 95% Wilson intervals.</p>'
        + _chart(scenarios_chart(report) if report["summary"]["actions"] else None,
                 "no actions ran") + "</section>",
        '<section id="timings"><h2>Timing diagnostics</h2><p class="muted">Per instance '
        '(immediate successes only): stop yield latency, interrupt timing difference '
        '(negative = before the target), recover latency from the interruption end.</p>'
        + _chart(timings_chart(report), "no timing observations in this run")
        + "</section>",
        f'<section id="paper"><h2>The paper\'s 14 models</h2>{_paper_section(report)}'
        "</section>",
    ]
    if report.get("baseline"):
        body.append(f'<section id="baseline"><h2>Baseline comparison</h2>'
                    f'{_baseline_section(report["baseline"])}</section>')
    body.append('<section id="failures"><h2>Failed instances</h2>'
                + _failures_section(report, roots, audio, out_dir, embed_limit)
                + "</section>")
    tot = report["totals"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>DuplexAct: {_esc(model)}</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}</style></head><body>"
            f"<header><h1>DuplexAct report: {_esc(model)}</h1><p>{tot['instances']} "
            f"instance(s), {tot['errors']} error(s) \u00b7 {_esc(report.get('created', ''))}"
            f"</p></header><nav>{nav}</nav><main>{''.join(body)}</main></body></html>\n")


def write(report: dict, out_path: str | Path, **kw) -> Path:
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(report, out_path=out, **kw), encoding="utf-8")
    return out
