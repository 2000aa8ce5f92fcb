"""The HTML report's charts: matplotlib figures as inline SVG (no network at view time), one
function per section (actions, conditions, heatmap, scenarios, timings). Reads the typed
report and the rows every view shares (rows.py); html.py places them."""

from __future__ import annotations

import io
import re

from ...data import paper as paper_data
from ...data import taxonomy
from ..model import Report
from ..stats import rate_of
from .rows import action_rows, condition_rows

SCENARIO_SHORT = {"casual": "C", "meeting": "M", "interview": "I", "customer_service": "S",
                  "unspecified": "U"}
# Figure 5's order; "unspecified" (data that does not say, e.g. released rows) last, only
# where it occurs
SCENARIO_ORDER = ("casual", "meeting", "interview", "customer_service", "unspecified")
SCENARIO_ROW_MARK = "\u00b7 "  # heat-map rows of this run's scenarios
COLOR = {"I": "#3b6ea8", "S": "#e08a2e", "paper": "#222222"}
ACTION_COLOR = dict(zip(taxonomy.ACTIONS, ("#4c72b0", "#55a868", "#c44e52", "#8172b2",
                                           "#ccb974", "#64b5cd", "#dd8452", "#937860")))


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
    for xi, r in zip(x, rates):  # a measured 0 % and nothing measured must not look alike
        if r.value is None:
            ax.text(xi, 1.5, "n/a", ha="center", va="bottom", fontsize=6.5, color="#999999",
                    rotation=90, style="italic")
        elif r.value == 0:
            ax.text(xi, 1.5, "0%", ha="center", va="bottom", fontsize=6.5, color="#222222",
                    rotation=90, fontweight="bold")
    return bars


def _style(ax, ylabel="%"):
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)


def actions_chart(report: Report) -> str:
    rows = action_rows(report)
    fig = _figure(8.0, 3.0)
    ax = fig.add_subplot()
    x = list(range(len(rows)))
    _rate_bars(ax, [i - 0.19 for i in x], [r.I for r in rows], COLOR["I"], 0.38,
               "I (immediate)")
    _rate_bars(ax, [i + 0.19 for i in x], [r.S for r in rows], COLOR["S"], 0.38,
               "S (follow-through)")
    ax.set_xticks(x, [f"{r.label}\nn={r.n}" for r in rows], fontsize=8)
    _style(ax, "success %")
    ax.legend(fontsize=8, frameon=False, ncols=2, loc="upper center", bbox_to_anchor=(0.5, 1.15))
    return _svg(fig)


def conditions_chart(report: Report) -> str:
    """The paper's Figure 3 for this run: per-condition I (top) and S (bottom) with Wilson
    whiskers, and the paper's mean over its models as a marker."""
    rows = condition_rows(report)
    pr = paper_data.load()
    fig = _figure(max(6.0, 0.42 * len(rows) + 1.5), 5.6)
    axes = fig.subplots(2, 1, sharex=True)
    x = list(range(len(rows)))
    for ax, metric in zip(axes, ("I", "S")):
        colors = [ACTION_COLOR[r.action] for r in rows]
        rates = [getattr(r, metric) for r in rows]
        vals = [100 * r.value if r.value is not None else 0.0 for r in rates]
        err = [[100 * (r.value - r.lo) if r.value is not None else 0 for r in rates],
               [100 * (r.hi - r.value) if r.value is not None else 0 for r in rates]]
        ax.bar(x, vals, 0.7, color=colors, yerr=err, capsize=2,
               error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        for xi, r in zip(x, rates):
            if r.value is None:
                ax.text(xi, 1.5, "n/a", ha="center", va="bottom", fontsize=6,
                        color="#777777", rotation=90)
        means = [pr.condition_mean(r.key)[0 if metric == "I" else 1] for r in rows]
        px = [xi for xi, m in zip(x, means) if m is not None]
        py = [100 * m for m in means if m is not None]
        ax.plot(px, py, linestyle="none", marker="D", markersize=4, color=COLOR["paper"],
                label="paper: mean over its models (full benchmark)")
        _style(ax, ("Immediate" if metric == "I" else "Subsequent") + " success %")
    axes[0].legend(fontsize=7.5, frameon=False, loc="upper right", bbox_to_anchor=(1, 1.18))
    axes[1].set_xticks(x, [r.label for r in rows], rotation=60, ha="right", fontsize=7.5)
    # action names under the groups
    start = 0
    for k in range(1, len(rows) + 1):
        if k == len(rows) or rows[k].action != rows[start].action:
            mid = (start + k - 1) / 2
            axes[0].text(mid, 107, rows[start].action_label, ha="center", va="bottom",
                         fontsize=7.5, color=ACTION_COLOR[rows[start].action])
            if k < len(rows):
                for ax in axes:
                    ax.axvline(k - 0.5, color="#cccccc", linewidth=0.6)
            start = k
    return _svg(fig)


def heatmap_rows(report: Report) -> tuple[list[str], list[list[float | None]]]:
    """Rows of the follow-through failure map (1 - S in %, None = not measured): this run
    pooled, this run per scenario, then the paper's models (Table 4's S)."""
    model = "this run" if report.model is None else report.model_label
    summary = report.summary
    acts = summary.actions
    labels, values = [], []

    def row(get):
        return [None if (r := get(a)) is None or r.value is None else 100 * (1 - r.value)
                for a in taxonomy.ACTIONS]

    labels.append(f"{model} (this run)")
    values.append(row(lambda a: rate_of(summary.counts(a), "S") if a in acts else None))
    for scen in SCENARIO_ORDER:
        if any(scen in summary.scenarios(a) for a in acts):
            labels.append(f"{SCENARIO_ROW_MARK}{taxonomy.SCENARIO_LABELS[scen]}")
            values.append(row(lambda a: rate_of(summary.scenarios(a).get(scen), "S")
                              if a in acts else None))
    pr = paper_data.load()
    for m in pr.models:
        labels.append(m.short)
        values.append([None if (c := pr.action(m.name, a)) is None or c["S"] is None
                       else 100 * (1 - c["S"]) for a in taxonomy.ACTIONS])
    return labels, values


def heatmap_chart(report: Report) -> str:
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


def scenarios_chart(report: Report) -> str:
    """Figure 5 for one model: per action, per scenario, I and S with Wilson whiskers."""
    summary = report.summary
    actions = [a for a in taxonomy.ACTIONS if a in summary.actions]
    fig = _figure(max(6.0, 1.25 * len(actions) + 1), 3.2)
    ax = fig.add_subplot()
    ticks, tick_labels = [], []
    x = 0.0
    for a in actions:
        start = x
        for scen in SCENARIO_ORDER:
            c = summary.scenarios(a).get(scen)
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


def timing_values(report: Report) -> dict[str, dict[str, list[float]]]:
    """Per timed action, per condition: the instances' timing diagnostics (seconds)."""
    out: dict[str, dict[str, list[float]]] = {}
    for inst in report.instances:  # outcome records (InstanceOutcome.to_dict)
        if inst["action"] in taxonomy.TIMING_DIAGNOSTIC and inst.get("timing") is not None \
                and not inst.get("error"):
            out.setdefault(inst["action"], {}).setdefault(inst["condition"], []).append(
                float(inst["timing"]))
    return out


def timings_chart(report: Report) -> str | None:
    values = timing_values(report)
    if not values:
        return None
    pr = paper_data.load()
    summary = report.summary
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
            lat = summary.latency(a, c.id) or {}
            for q in ("p10", "p90"):  # report.json's percentiles, as the latency table has them
                if lat.get(q) is not None:
                    ax.plot([k - 0.32], [lat[q]], "_", markersize=9, markeredgewidth=1.6,
                            color=COLOR["paper"], gid=f"latency-{q}-{a}-{c.id}")
        ax.set_xticks(range(len(conds)), [c.label for c in conds], rotation=45, ha="right",
                      fontsize=7)
        ax.set_xlim(-0.6, len(conds) - 0.4)
        ax.axhline(0, color="#bbbbbb", linewidth=0.6)
        ax.set_title(f"{taxonomy.ACTION_LABELS[a]}\n{taxonomy.TIMING_TITLES[a]}", fontsize=8)
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(axis="y", labelsize=7)
    axes[0].set_ylabel("seconds")
    axes[-1].plot([], [], "o", color=COLOR["I"], label="this run (one dot per instance)")
    axes[-1].plot([], [], "_", color="#999999", markersize=7,
                  label="the paper's models: median per condition (Table 15)")
    axes[-1].plot([], [], "_", color=COLOR["paper"], markersize=9, markeredgewidth=1.6,
                  label="this run: p10 and p90 (report.json latency)")
    fig.legend(fontsize=7.5, frameon=False, loc="lower center", ncols=2,
               bbox_to_anchor=(0.5, 1.0))
    return _svg(fig)


def paired_deltas_chart(section: dict) -> str | None:
    """The paired comparison as a forest plot: per action and condition, this run's rate
    minus the baseline's in points with its 95% Newcombe interval; red where it dropped
    significantly. None when the comparison was not paired (no intervals)."""
    rows = [r for r in section.get("comparisons") or [] if r.get("ci")]
    if not rows:
        return None
    fig = _figure(7.5, 0.22 * len(rows) + 1.0)
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows):
        color = "#c0392b" if r["dropped"] else ACTION_COLOR[r["action"]]
        lo, hi = (100 * v for v in r["ci"])
        ax.plot([lo, hi], [yi, yi], color=color, linewidth=1.4)
        ax.plot([100 * r["delta"]], [yi], marker="o" if r["condition"] is None else "s",
                markersize=4.5 if r["condition"] is None else 3.5, color=color)
    ax.axvline(0, color="#444444", linewidth=0.8)
    ax.set_xlim(-105, 105)
    ax.set_yticks(y, [r["target"] if r["condition"] is None else f"  {r['target']}"
                      for r in rows], fontsize=7)
    ax.set_xlabel("this run \u2212 baseline (points), 95% Newcombe interval", fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return _svg(fig)
