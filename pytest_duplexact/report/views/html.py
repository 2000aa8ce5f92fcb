"""The HTML view of a report: one self-contained page (no network at view time: the charts are
inline SVG drawn with matplotlib (charts.py), the failures' timeline lanes hand-written SVG
(lanes.py), the styles inline, the audio embedded or linked). This module is the page.

Sections (each a ``<section id=...>``): summary, actions (I / S bars with Wilson whiskers),
conditions (the paper's Figure 3 layout), heatmap (follow-through failure 1 - S, Figure 4),
scenarios (Figure 5), timings (stop / interrupt / recover distributions), paper (Table 4 of
the 14 models), baseline (when compared), failures (every failed instance: reason, audio,
timeline lanes).

Reads the JSON report, plus each failed instance's ``timeline.json`` and recordings (FLAC, or
WAV for a run made with ``--duplexact-audio-format=wav``) from its run directory when they can
be found (next to the report, or the shards' run directories recorded by ``duplexact merge``).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

from ...data import paper as paper_data
from ...data import taxonomy
from ...run.rundir import RunDir
from ..model import Report
from ..output import check_output, write_output
from . import rows as view_rows
from .charts import (  # noqa: F401 (heatmap_rows: also importable as html.heatmap_rows)
    actions_chart,
    conditions_chart,
    heatmap_chart,
    heatmap_rows,
    scenarios_chart,
    timings_chart,
)
from .lanes import LANES, lanes_svg  # noqa: F401 (part of this module's interface)

AUDIO_MODES = ("embed", "link", "none")
# Failed instances whose audio is embedded (chosen round-robin over conditions, so every
# condition keeps examples); about 50 kB of base64 Ogg Vorbis per instance (two 20 s clips).
DEFAULT_EMBED_LIMIT = 60


def embed_limit(args) -> int:
    """The page's ``--embed-limit``: the default when not given, and 0 when 0 is given (an
    ``or`` read 0 as not given)."""
    given = getattr(args, "embed_limit", None)
    return DEFAULT_EMBED_LIMIT if given is None else given


# libsndfile's Vorbis compression level (0 best .. 1 smallest): ~8 kbit/s at 16 kHz, clear
# speech, and 5-10x faster to encode than Opus here.
VORBIS_LEVEL = 0.8
SECTIONS = ("summary", "actions", "conditions", "heatmap", "scenarios", "timings", "paper",
            "baseline", "borderline", "failures")


class HtmlError(ValueError):
    pass


# --- audio --------------------------------------------------------------------------------------

def audio_data_uri(path: Path) -> str:
    """A recording (FLAC or WAV) as a small base64 data URI: Ogg Vorbis at 16 kHz (~8 kbit/s),
    or 8 kHz 16-bit WAV where this libsndfile cannot encode Vorbis."""
    import soundfile as sf

    from ...data.audio import resample

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
.unsure{color:#9a5b00;font-weight:600}
.chart svg{max-width:100%;height:auto}
.failure{border:1px solid #ddd;border-radius:4px;margin:14px 0;padding:8px 12px}
.failure h3{margin:0 0 4px;font-size:15px} .failure .reason{margin:2px 0}
.failure audio{height:32px;vertical-align:middle}
.track{display:inline-flex;align-items:center;gap:4px;white-space:nowrap;margin-right:14px}
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


def _recording_roots(report: Report, report_path: Path | None, extra) -> list[Path]:
    roots = [Path(p) for p in extra]
    if report_path is not None:
        roots.append(Path(report_path).resolve().parent)
    base = Path(report_path).resolve().parent if report_path is not None else Path.cwd()
    if isinstance(report.run_dir, str):  # relative to the report file (session.finish)
        roots.append(base / report.run_dir)
    for s in report.shards or ():
        if s.get("run_dir"):
            roots.append(Path(s["run_dir"]))
        roots.append(base / Path(s["report"]).parent.name)  # shard run dirs copied beside
    return roots


def _instance_folder(inst: dict, roots: list[Path]) -> Path | None:
    rel = inst.get("recording")
    if not rel:
        return None
    for root in roots:
        p = RunDir(root).folder(rel)
        if p.is_dir():
            return p
    return None


def _selection_text(sel: dict) -> str:
    """The selection in words: ``take_turn, wait; at most 2 per condition (seed 0); shard 1/3``."""
    parts = []
    for key, label in (("actions", "actions"), ("conditions", "conditions"),
                       ("scenarios", "scenarios"), ("sources", "sources"),
                       ("corpora", "corpora")):
        if sel.get(key):
            parts.append(f"{label}: {', '.join(sel[key])}")
    if sel.get("limit"):
        parts.append(f"at most {sel['limit']} per condition (seed {sel.get('seed', 0)})")
    if sel.get("shard"):
        parts.append(f"shard {sel['shard']}")
    return "; ".join(parts) or "every instance"


def _transcriber(report: Report) -> str:
    """The setting and, where it chose, the transcriber the run used (from its usage)."""
    setting = (report.settings or {}).get("transcriber") or "auto"
    used = ((report.usage or {}).get("transcriber") or {}).get("model")
    return f"{setting} (used: {used})" if used and used != setting else setting


def _summary(report: Report) -> str:
    s = report.settings or {}
    tot = report.totals
    served = [["served as", report.served.get("description")]] \
        if report.served and report.served.get("description") else []
    rows = [["model", report.model_label], *served, ["instances", tot.instances],
            ["harness / model errors", tot.errors],
            ["dataset", f"{s.get('dataset')} (fingerprint "
                        f"{str(s.get('dataset_fingerprint'))[:12]})"],
            ["text judge", s.get("judge") or "none (S not judged except stop)"],
            *([["judges' server", ", ".join(
                f"{k.replace('_', ' ')}: {j['endpoint']} ({j['url']})"
                for k, j in report.judges.items() if isinstance(j, dict))]]
              if report.judges else []),
            ["audio judge", s.get("audio_judge") or "none"],
            ["model options", ", ".join(f"{k}={v}" for k, v in
                                        (s.get("model_options") or {}).items()) or "none"],
            ["transcriber", _transcriber(report)], ["simulator", s.get("simulator")],
            ["selection", _selection_text(s.get("selection") or {})],
            ["generator", report.generator], ["created", report.created]]
    if report.shards:
        rows.append(["merged from", ", ".join(f"{x['shard']} ({x['instances']})"
                                              for x in report.shards)])
    out = [_table(["", "value"], [[k, "" if v is None else v] for k, v in rows], left={1})]
    gates = report.gate_list()
    if gates:
        out.append("<h3>Gates</h3><ul>" + "".join(
            f'<li class="{"pass" if g.passed else "fail"}">{_esc(g.message)}</li>'
            for g in gates) + "</ul>")
    else:
        out.append('<p class="muted">No gates were set (--duplexact-gate).</p>')
    b = report.baseline
    if b:
        from ..sections.baseline import css_class

        out.append(f'<p class="{css_class(b)}">{_esc(b["message"])} '
                   '(<a href="#baseline">details</a>)</p>')
    for note in report.note_lines():
        out.append(f'<p class="note">{_esc(note)}</p>')
    from ..sections.timing import line as timing_line

    if (timing := timing_line(report.clock)) is not None:
        out.append(f'<p class="{"warn" if report.clock["unreliable"] else "note"}">'
                   f'{_esc(timing)}</p>')
    out.append(_s_mark(report))
    out.append('<p class="note">Every rate carries its n and a 95% Wilson interval '
               '[lo\u2013hi]; <b>~</b> marks an interval wider than \u00b110 points: too few '
               'instances to read the rate closely. Whiskers on the charts are the same '
               'intervals.</p>')
    return "".join(out)


def _s_mark(report: Report) -> str:
    """Under every table and chart of S: the self-hosted judge's mark
    (report/sections/judging.py)."""
    from ..sections.judging import s_note

    note = s_note(report)
    return f'<p class="warn"><b>S</b>: {_esc(note)}</p>' if note else ""


def _action_table(report: Report) -> str:
    rows = [[r.label, view_rows.fmt_rate(r.I), r.I.n, view_rows.fmt_rate(r.S), r.S.n,
             view_rows.fmt_timing(r.timing) if r.timed else "", r.n, r.notes]
            for r in view_rows.action_rows(report)]
    return _table(["Action", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S",
                   "T median (IQR, n) s", "n", "not in a rate"], rows, left={7})


def _condition_table(report: Report) -> str:
    pr = paper_data.load()
    rows = []
    for r in view_rows.condition_rows(report):
        mi, ms = pr.condition_mean(r.key)
        paper_cell = f"{view_rows.fmt_rate_value(mi)} / {view_rows.fmt_rate_value(ms)}"
        rows.append([f"{r.action_label} / {r.label}", view_rows.fmt_rate(r.I), r.I.n,
                     view_rows.fmt_rate(r.S), r.S.n, r.n, r.notes, paper_cell])
    return _table(["Condition", "I % [95% CI]", "n_I", "S % [95% CI]", "n_S", "n",
                   "not in a rate", "paper mean I / S"], rows, left={6})


def _corpora_section(report: Report) -> str:
    """Per corpus (released data only): pooled I / S, then per action."""
    return _table(view_rows.corpus_header(report), view_rows.corpus_rows(report))


def _paper_comparison_section(section: dict) -> str:
    out = [f'<p class="warn">{_esc(section["note"])}</p>',
           f'<p class="muted">{_esc(section["method"])}</p>']
    def paper_n(r):  # for I the paper's n is a lower bound (report/sections/paper_comparison.py)
        return ("\u2265" if r["paper_n_is_lower_bound"] else "=") + str(r["paper_n"])

    rows = [[f"{r['action']}.{r['condition']}", r["metric"], r["model"],
             f"{100 * r['run']:.1f} (n={r['run_n']})", f"{100 * r['paper']:.1f} "
             f"(n{paper_n(r)})", f"{r['p_adjusted']:.3g}"]
            for r in section["comparisons"] if r["significant"]]
    out.append(f"<p>{len(section['comparisons'])} comparisons, {len(rows)} significant at "
               f"{section['alpha']} (Holm).</p>")
    if rows:
        out.append(_table(["Condition", "", "Paper model", "This run %", "Paper %",
                           "p (Holm)"], rows))
    return "".join(out)


def _paper_section(report: Report) -> str:
    pr = paper_data.load()
    same = report.totals.instances == pr.instances
    out = [f'<p class="{"note" if same else "warn"}">{_esc(view_rows.paper_note(report))}</p>']
    rows = view_rows.paper_rows(report, f"{report.model_label} (this run)")
    out.append(_table(view_rows.PAPER_HEADER, rows, ["mine"] + [""] * len(pr.models)))
    out.append('<p class="muted">Table 4 of the paper: I / S in %, T the median timing in '
               'seconds (Stop: yield latency; Interrupt: timing difference; Recover: '
               'recovery latency); \u2013 = not evaluated on Simulator Replay.</p>')
    return "".join(out)


def _latency_table(report: Report) -> str:
    """Latency p10 / p50 / p90 with n and the no-response rate (report/views/latency_rows.py)."""
    from . import latency_rows

    found = latency_rows.rows(report)
    if not found:
        return ""
    return ('<p class="muted">Latency as a distribution, every trial (not only successes); '
            'no response: no substantive model speech in the trial, counted apart from late; '
            'paper medians: the range of its models\' Table 15 medians.</p>'
            + _table(latency_rows.HEADER, [[r.label] + latency_rows.cells(r) for r in found]))


def _robustness_section(sec: dict) -> str:
    """Action x channel I rates (report/sections/robustness.py): the Markdown table as HTML."""
    from ..sections.robustness import cell

    acts = sec["actions"]
    rows = [[row["channel"]] + [cell(row["actions"][a]) for a in acts]
            + ["" if row["pairing"] is None else
               f"{row['flips_to_failure']} / {row['flips_to_success']}"]
            for row in sec["channels"]]
    ref = "the clean run" if sec["reference"] else "no clean run stored: no test"
    return (f'<p class="muted">This model on these data under every channel the run store '
            f'holds (docs/channels.md). I in % [95% Wilson CI] (n); * / + = significantly '
            f'lower / higher than {_esc(ref)} (paired McNemar, Holm-adjusted).</p>'
            + _table(["channel"] + [taxonomy.ACTION_LABELS[a] for a in acts]
                     + ["flips (to failure / to success)"], rows))


def _baseline_section(b: dict, in_report: bool = True) -> str:
    """The comparison's verdict, method and table; ``in_report=False`` (the comparison page,
    which shows the verdict, warnings and flips itself) leaves those out."""
    from ..sections.baseline import (
        against,
        change_text,
        css_class,
        newly_measured_line,
        not_measured_text,
        other_not_compared,
        power_lines,
        verdict,
    )

    out = [f'<p class="{css_class(b)}">{_esc(b["message"])}</p>'] if in_report else []
    if b.get("path"):
        out.append(f"<p>Baseline <code>{_esc(b['path'])}</code>: {_esc(against(b))}.</p>")
    if b.get("pairing_note"):
        out.append(f"<p><b>{_esc(b['pairing'])}</b>: {_esc(b['pairing_note'])}.</p>")
    out.append(f'<p class="muted">{_esc(b.get("method", ""))}; alpha {b["alpha"]:g}.</p>')
    for w in b.get("warnings", []) if in_report else ():
        out.append(f'<p class="warn">{_esc(w)}</p>')
    rows, classes = [], []
    for r in b["comparisons"]:
        rows.append([r["target"], f"{100 * r['baseline']['rate']:.1f} ({r['baseline']['n']})",
                     f"{100 * r['current']['rate']:.1f} ({r['current']['n']})",
                     change_text(r), f"{r['p_value']:.2g}",
                     f"{r['p_adjusted']:.2g}", r["test"], verdict(r, b["alpha"])])
        classes.append("mine" if r["dropped"] else "")
    if rows:
        out.append(_table(["Comparison", "baseline % (n)", "this run % (n)",
                           "\u0394 points (paired: 95% CI; pairs)", "p", "p (Holm)", "test",
                           "verdict"], rows, classes))
    for m in b.get("not_measured_now") or []:
        out.append(f'<p class="warn">{_esc(not_measured_text(m))}</p>')
    for s in other_not_compared(b):
        out.append(f'<p class="muted">not compared: {_esc(s["target"])}: '
                   f'{_esc(s["why"])}</p>')
    for line in power_lines(b) + [newly_measured_line(b) or ""]:
        if line:
            out.append(f'<p class="muted">{_esc(line)}</p>')
    if b.get("flips") and in_report:
        out.append(f"<p>{len(b['flips'])} instance(s) flipped; <code>duplexact compare "
                   "BASELINE.json THIS.json --html</code> shows each with both runs' lanes and "
                   "audio.</p>")
    return "".join(out)


def instance_media(inst: dict, folder: Path, audio: str, embedded: bool,
                   out_dir: Path) -> list[str]:
    """One instance's audio players (embedded, linked or none) and its timeline lanes."""
    parts, players = [], []
    tracks = RunDir.tracks(folder)
    for name, wav in tracks.items():
        if embedded:
            src = audio_data_uri(wav)
        elif audio == "link":
            src = Path(os.path.relpath(wav, out_dir)).as_posix()
        else:
            continue
        preload = "metadata" if embedded else "none"
        players.append(f'<label class="track">{name} <audio controls preload="{preload}" '
                       f'src="{_esc(src)}"></audio></label>')
    if players:
        parts.append("<div>" + "".join(players) + "</div>")
    elif audio != "none" and not tracks:  # nothing to embed or link: say why, not a limit
        parts.append(f'<p class="muted">{_esc(no_recording_text(inst))}</p>')
    elif audio == "embed":
        parts.append('<p class="muted">audio not embedded (limit reached)</p>')
    try:
        parts.append(lanes_svg(RunDir.read_timeline(folder), inst))
    except FileNotFoundError:
        pass
    return parts


def no_recording_text(inst: dict) -> str:
    """Why an instance's folder holds no audio: it ended in an error before any was written,
    or the files are gone."""
    if inst.get("error"):
        return ("no recording: the instance ended in an error before any audio was "
                "written (the error is above)")
    return "no recording: its folder holds no input or output audio file"


def _borderline_mark(inst: dict) -> str:
    return (f'<p class="warn borderline"><b>borderline I</b>: '
            f'{_esc(view_rows.borderline_text(inst, limit=8))}</p>')


def _borderline_section(report: Report) -> str:
    """The count per action, then every borderline instance with what would flip it (a
    failed one links to its lanes and audio below)."""
    line = view_rows.borderline_line(report)
    if line is None:
        return ('<p class="muted">This report was written before borderline verdicts were '
                "computed.</p>")
    marked = [i for i in report.instances if view_rows.borderline_flips(i)]
    out = [f"<p>{_esc(line)}.</p>"]
    table = []
    for inst in marked:
        iid = _esc(inst["id"])
        name = f'<a href="#i-{iid}">{iid}</a>' if view_rows.failed(inst) else iid
        table.append([name, _esc(inst["immediate"]["verdict"]),
                      _esc(view_rows.borderline_text(inst, limit=8))])
    if table:
        out.append("<table><tr><th>Instance</th><th>I</th><th>would flip with</th></tr>"
                   + "".join(f"<tr><td>{a}</td><td>{b}</td><td>{c}</td></tr>"
                             for a, b, c in table) + "</table>")
    return "".join(out)


def _failures_section(report: Report, roots: list[Path], audio: str, out_dir: Path,
                      embed_limit: int) -> str:
    bad = [i for i in report.instances if view_rows.failed(i)]
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
        stage, reason = view_rows.failure_reason(inst)
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
        if view_rows.borderline_flips(inst):
            parts.append(_borderline_mark(inst))
        if folder is None:
            missing += 1
            parts.append('<p class="muted">recordings not found (looked next to the report '
                         "and in the shards' run directories)</p>")
        else:
            parts += instance_media(inst, folder, audio, inst["id"] in embed, out_dir)
        parts.append("</div>")
        out.append("".join(parts))
    if missing:
        out.insert(1, f'<p class="warn">Recordings of {missing} failed instance(s) were not '
                   "found: render the report from inside its run directory (or pass the run "
                   "directories) to get their audio and timelines.</p>")
    return "".join(out)


def render(report: Report, *, report_path: str | Path | None = None,
           out_path: str | Path | None = None, audio: str = "embed",
           embed_limit: int = DEFAULT_EMBED_LIMIT, recordings=()) -> str:
    """The page as a string. ``audio``: 'embed' (base64 in the page, failed instances only,
    up to ``embed_limit``), 'link' (relative links to the run's audio files) or 'none'.
    ``recordings``: extra run directories to look for instance folders in."""
    if audio not in AUDIO_MODES:
        raise HtmlError(f"audio must be one of {', '.join(AUDIO_MODES)}, got {audio!r}")
    roots = _recording_roots(report, Path(report_path) if report_path else None, recordings)
    out_dir = Path(out_path).resolve().parent if out_path else Path.cwd()
    model = report.model_label or "?"
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in SECTIONS
                  if s != "baseline" or report.baseline)
    body = [
        f'<section id="summary"><h2>Summary</h2>{_summary(report)}</section>',
        '<section id="actions"><h2>Actions: immediate (I) and follow-through (S)</h2>'
        + _chart(actions_chart(report), "no actions ran") + _action_table(report)
        + _s_mark(report) + "</section>",
        '<section id="conditions"><h2>Conditions (the paper\'s Figure 3 and Table 16)</h2>'
        + _chart(conditions_chart(report) if view_rows.condition_rows(report) else None,
                 "no conditions ran") + _condition_table(report) + _s_mark(report)
        + "</section>",
        '<section id="heatmap"><h2>Follow-through failure (1 \u2212 S), Figure 4 style</h2>'
        '<p class="muted">This run pooled and per scenario (top rows), then the paper\'s '
        'models per action (Table 4; full benchmark). Gray: no S measured (no immediate '
        'success, or no judge).</p>' + _chart(heatmap_chart(report), "") + _s_mark(report)
        + "</section>",
        '<section id="scenarios"><h2>Scenarios, Figure 5 style</h2><p class="muted">'
        'C: casual conversation, M: meeting, I: interview, S: customer service'
        + (', U: unspecified (the data does not say)' if any(
            "unspecified" in a["scenarios"] for a in report.summary.actions.values())
           else '') + '; markers are '
        'this run\'s rates, whiskers their 95% Wilson intervals.</p>'
        + _chart(scenarios_chart(report) if report.summary.actions else None,
                 "no actions ran") + "</section>",
        '<section id="timings"><h2>Timing diagnostics</h2><p class="muted">Per instance '
        '(immediate successes only): stop yield latency, interrupt timing difference '
        '(negative = before the target), recover latency from the interruption end.</p>'
        + _chart(timings_chart(report), "no timing observations in this run")
        + _latency_table(report) + "</section>",
        f'<section id="paper"><h2>The paper\'s 14 models</h2>{_paper_section(report)}'
        "</section>",
    ]
    if report.summary.corpora:  # released data: per corpus, the paper side by side
        nav += '<a href="#corpora">corpora</a>'
        body.append(f'<section id="corpora"><h2>Corpora</h2>{_corpora_section(report)}'
                    "</section>")
    if report.paper_comparison:
        nav += '<a href="#paper-comparison">paper comparison</a>'
        body.append('<section id="paper-comparison"><h2>The paper side by side, per '
                    f'condition</h2>{_s_mark(report)}'
                    f'{_paper_comparison_section(report.paper_comparison)}'
                    "</section>")
    if report.robustness:
        nav += '<a href="#robustness">robustness</a>'
        body.append('<section id="robustness"><h2>Robustness: I by channel</h2>'
                    f'{_robustness_section(report.robustness)}</section>')
    if report.baseline:
        body.append(f'<section id="baseline"><h2>Baseline comparison</h2>'
                    f'{_baseline_section(report.baseline)}</section>')
    body.append('<section id="borderline"><h2>Borderline verdicts</h2>'
                + _borderline_section(report) + "</section>")
    body.append('<section id="failures"><h2>Failed instances</h2>'
                + _failures_section(report, roots, audio, out_dir, embed_limit)
                + "</section>")
    tot = report.totals
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>DuplexAct: {_esc(model)}</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}</style></head><body>"
            f"<header><h1>DuplexAct report: {_esc(model)}</h1><p>{tot.instances} "
            f"instance(s), {tot.errors} error(s) \u00b7 {_esc(report.created or '')}"
            f"</p></header><nav>{nav}</nav><main>{''.join(body)}</main></body></html>\n")


def write(report: Report, out_path: str | Path, **kw) -> Path:
    """The page as the file ``out_path`` (report/output.py: checked before it is rendered,
    written whole or not at all; an ``OutputError`` says why it cannot be)."""
    out = Path(out_path)
    check_output(out)
    return write_output(out, render(report, out_path=out, **kw))
