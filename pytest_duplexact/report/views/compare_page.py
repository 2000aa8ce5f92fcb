"""The comparison page of ``duplexact compare A B --html``: one self-contained page.

Sections: summary (what was compared with what, the verdict, warnings), deltas (the paired
differences per action and condition as a forest plot with their 95% intervals, then the
table of every comparison), flips (every instance whose verdict changed, with both runs'
reasons, and both runs' timeline lanes and audio side by side). The page, its styles, the
audio encoding, the lanes and the charts are the report page's own (html.py, lanes.py,
charts.py).
"""

from __future__ import annotations

from pathlib import Path

from ...data import taxonomy
from ..model import Report
from ..output import check_output, write_output
from ..sections.baseline import against, css_class
from .charts import paired_deltas_chart
from .html import (
    AUDIO_MODES,
    CSS,
    DEFAULT_EMBED_LIMIT,
    HtmlError,
    _baseline_section,
    _chart,
    _esc,
    _instance_folder,
    _recording_roots,
    _table,
    instance_media,
)
from .rows import borderline_flips, borderline_text

SIDE_CSS = (".pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}"
            ".pair>div{min-width:0}.pair h4{margin:4px 0;font-size:13px}"
            # half a page holds one player a line: each label on its own line, with its player
            ".pair .track{display:flex;margin:2px 0}.pair .track audio{flex:1;min-width:0}")


def _summary(section: dict, a: Report, b: Report, a_path, b_path) -> str:
    def who(rep: Report, path):
        s = rep.settings or {}
        return [str(path), rep.model_label, rep.created, str(rep.dataset_fingerprint)[:12],
                rep.totals.instances if rep.totals else None, s.get("judge") or "none"]

    out = [_table(["", "report", "model", "created", "dataset fingerprint", "instances",
                   "judge"], [["A (baseline)"] + who(a, a_path), ["B (this run)"]
                              + who(b, b_path)], left={1})]
    out.append(f'<p class="{css_class(section)}">'
               f'{_esc(section["message"])}</p>')
    for w in section["warnings"]:
        out.append(f'<p class="warn">{_esc(w)}</p>')
    return "".join(out)


def _flip(f: dict, sides: dict, roots: dict, audio: str, embedded: bool,
          out_dir: Path) -> str:
    cond = taxonomy.condition(f["action"], f["condition"])
    cls = "fail" if f["direction"].endswith("failure") else "pass"
    parts = [f'<div class="failure" id="flip-{_esc(f["id"])}-{f["metric"]}">'
             f'<h3>{_esc(f["id"])} \u00b7 {f["metric"]} <span class="{cls}">'
             f'{_esc(f["direction"])}</span></h3>'
             f'<p class="muted">{_esc(taxonomy.ACTION_LABELS[f["action"]])} / '
             f'{_esc(cond.label)} \u00b7 {_esc(f.get("scenario"))}</p><div class="pair">']
    for side, reason in (("A (baseline)", f["baseline_reason"]),
                         ("B (this run)", f["current_reason"])):
        model, by_id = sides[side]
        inst = by_id[f["id"]]
        parts.append(f'<div><h4>{side}: {_esc(model)}</h4>'
                     f'<p class="reason">{_esc(reason)}</p>')
        if borderline_flips(inst):
            parts.append(f'<p class="warn">borderline I: '
                         f'{_esc(borderline_text(inst, limit=8))}</p>')
        folder = _instance_folder(inst, roots[side])
        if folder is None:
            parts.append('<p class="muted">recordings not found (looked next to the report '
                         "and in its run directory)</p>")
        else:
            parts += instance_media(inst, folder, audio, embedded, out_dir)
        parts.append("</div>")
    return "".join(parts) + "</div></div>"


def _latency_deltas(a: Report, b: Report) -> str:
    """Each action's and condition's median latency in both runs, n, and the change."""
    from .latency_rows import DELTA_HEADER, delta_cells, deltas

    found = deltas(a, b)
    if not found:
        return ""
    return ("<h3>Latency</h3><p>p50 in seconds with n per run; change = B - A (descriptive, "
            "no test).</p>"
            + _table(DELTA_HEADER, [[d["label"]] + delta_cells(d) for d in found], left={0}))


def render(section: dict, a: Report, b: Report, *, a_path=None, b_path=None, out_path=None,
           audio: str = "embed", embed_limit: int = DEFAULT_EMBED_LIMIT) -> str:
    """The page as a string. ``section``: baseline.compare(b, a); ``audio`` as for the report
    page, the embed limit counted in flips (each embeds both runs' tracks)."""
    if audio not in AUDIO_MODES:
        raise HtmlError(f"audio must be one of {', '.join(AUDIO_MODES)}, got {audio!r}")
    roots = {"A (baseline)": _recording_roots(a, Path(a_path) if a_path else None, ()),
             "B (this run)": _recording_roots(b, Path(b_path) if b_path else None, ())}
    out_dir = Path(out_path).resolve().parent if out_path else Path.cwd()
    flips = section["flips"]
    if section["pairing"] == "paired":
        flip_html = [f"<p>{len(flips)} instance(s) changed verdict. Each shows run A on the "
                     "left and run B on the right: the reason, the audio and the timeline "
                     "lanes (hover a shape for its times and text).</p>"]
        if audio == "embed" and len(flips) > embed_limit:
            flip_html.append(f'<p class="note">Audio embedded for the first {embed_limit} '
                             f"of {len(flips)} flips; render with --audio=link to link every "
                             "recording instead.</p>")
        sides = {"A (baseline)": (a.model_label, {d["id"]: d for d in a.instances}),
                 "B (this run)": (b.model_label, {d["id"]: d for d in b.instances})}
        flip_html += [_flip(f, sides, roots, audio, audio == "embed" and k < embed_limit,
                            out_dir) for k, f in enumerate(flips)]
        flip_body = "".join(flip_html) if flips else '<p class="muted">No instance flipped.</p>'
    else:
        flip_body = (f'<p class="muted">Not paired ({_esc(section["pairing_note"])}): no '
                     "instance-level flips.</p>")
    body = [f'<section id="summary"><h2>Summary</h2>{_summary(section, a, b, a_path, b_path)}'
            "</section>",
            '<section id="deltas"><h2>Deltas per action and condition</h2>'
            + _chart(paired_deltas_chart(section), "no paired intervals (unpaired comparison)")
            + _baseline_section(section, in_report=False) + _latency_deltas(a, b) + "</section>",
            f'<section id="flips"><h2>Flips</h2>{flip_body}</section>']
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in ("summary", "deltas", "flips"))
    title = f"A {against(section)} vs B {b.model_label}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>DuplexAct comparison: {_esc(title)}</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}{SIDE_CSS}</style></head><body>"
            f"<header><h1>DuplexAct comparison: A {_esc(a.model_label)} vs B "
            f"{_esc(b.model_label)}</h1><p>A {_esc(a.created or '')} (the baseline), B "
            f"{_esc(b.created or '')} \u00b7 {_esc(section['pairing'])}</p></header>"
            f"<nav>{nav}</nav><main>{''.join(body)}</main></body></html>\n")


def write(section: dict, a: Report, b: Report, out_path, **kw) -> Path:
    """The page as the file ``out_path``, as html.write writes the report page."""
    out = Path(out_path)
    check_output(out)
    return write_output(out, render(section, a, b, out_path=out, **kw))
