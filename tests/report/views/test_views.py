"""Markdown and HTML views of a synthetic report (no model run): content, structure, audio
embedding and links, self-containment."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
import soundfile as sf

from pytest_duplexact.report.views import html as html_view
from pytest_duplexact.report.views import markdown
from tests.report.helpers import mixed_report, parsed, write_run_dir

FAILED = {  # of mixed_report: 1 wait, 3 take_turn, 1 stop (S), 1 recover, 1 error
    "wait-inter_sentential_pause-interview-05", "take_turn-delayed-casual-03",
    "take_turn-delayed-meeting-04", "take_turn-delayed-interview-05",
    "stop-direct_interruption-meeting-01", "recover-revise-casual-03",
    "interrupt-help-casual-00"}


@pytest.fixture(scope="module")
def rep():
    return mixed_report()


def test_markdown_tables_carry_n_and_intervals(rep):
    text = markdown.render(parsed(rep))
    # 5 of 6 wait: Wilson [43.6, 97.0]
    assert "| Wait | 83.3 [43.6\u201397.0]~ | 6 | n/a | 0 |" in text
    # stop: S 4 of 5 with T median over 5 timings
    assert "| Stop | 100.0 [56.6\u2013100.0]~ | 5 | 80.0 [37.6\u201396.4]~ | 5 | 0.40 (0.20, 5) |" \
        in text
    assert "| Take Turn | Delayed | 50.0 [18.8\u201381.2]~ | 6 |" in text
    assert "| Hold Floor | Continue | n/a | 0 | n/a | 0 | 1 | 1 excluded |" in text
    assert "| Interrupt | Help | n/a | 0 | n/a | 0 | 1 | 1 errors |" in text
    assert "No gates were set" in text


def test_markdown_shows_the_paper_models_with_the_caveat(rep):
    text = markdown.render(parsed(rep))
    assert "### The paper's 14 models (Table 4)" in text
    assert "4,691 instances" in text and "context, not a comparison" in text
    assert "| **toy (this run)** | 83.3~ / n/a | \u2013 | 50.0~ / n/a |" in text
    assert "| GPT-Realtime-2.1 | 99.8 / 95.7 |" in text
    assert "| Moshi | 82.2 / 45.6 | 32.5 / 89.2 | 36.2 / 19.4 | 6.2 / 60.0 | " \
           "98.0 / 0.96 / 70.7 |" in text
    # the paper reports no simulator-replay action for Mini-Omni2: a dash, never a number
    (mini,) = [line for line in text.splitlines() if line.startswith("| Mini-Omni2 |")]
    assert mini.endswith("| \u2013 | \u2013 | \u2013 | \u2013 |")


def test_markdown_lists_failed_instances_with_reasons(rep):
    text = markdown.render(parsed(rep))
    assert "7 failed instance(s)" in text
    for iid in FAILED:
        assert f"| {iid} |" in text
    assert "| stop-direct_interruption-meeting-01 | S | follow-through broke" in text
    assert "| interrupt-help-casual-00 | error | RuntimeError: boom |" in text


def test_markdown_gates_and_baseline(rep):
    from pytest_duplexact.report.sections import baseline

    r = dict(rep)
    r["gates"] = [{"gate": "wait.I>=0.9", "passed": False,
                   "message": "FAILED wait.I>=0.9: wait.I = 83.3%, needs >= 90.0%"}]
    r["baseline"] = baseline.compare(parsed(r), parsed(r))
    text = markdown.render(parsed(r))
    assert "- \u274c FAILED wait.I>=0.9" in text
    assert "### Baseline comparison" in text and "passed baseline" in text


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.audio, self.tags, self.svgs = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "audio":
            self.audio.append(a["src"])
        if tag == "svg":
            self.svgs += 1


def _parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


@pytest.fixture(scope="module")
def run_dir(rep, tmp_path_factory):
    return write_run_dir(tmp_path_factory.mktemp("run"), rep)


@pytest.fixture(scope="module")
def page(rep, run_dir):
    return html_view.render(parsed(rep), report_path=run_dir)


def test_html_has_every_section_and_chart(page):
    p = _parse(page)
    for s in html_view.SECTIONS:
        if s != "baseline":
            assert s in p.ids, s
    assert "baseline" not in p.ids  # only when compared
    # 5 charts (actions, conditions, heatmap, scenarios, timings) + lanes per failure
    assert p.svgs == 5 + len(FAILED)
    for iid in FAILED:
        assert f"i-{iid}" in p.ids


def test_html_embeds_audio_of_failures_only(page):
    p = _parse(page)
    # two players per failed instance with recordings (the errored one has them too)
    assert len(p.audio) == 2 * len(FAILED)
    for src in p.audio:
        assert src.startswith("data:audio/ogg;base64,")
    data, sr = sf.read(io.BytesIO(base64.b64decode(p.audio[0].split(",", 1)[1])))
    assert sr == 16000 and abs(len(data) / sr - 4.0) < 0.05
    assert len(page) < 1_000_000


def test_html_is_self_contained(page):
    p = _parse(page)
    assert not [t for t, a in p.tags if t in ("script", "link", "img", "iframe", "object")]
    # every reference is inline (data:), an anchor, or an SVG namespace: nothing is fetched
    for tag, attrs in p.tags:
        for key in ("src", "href", "xlink:href"):
            ref = attrs.get(key)
            if ref is not None:
                assert ref.startswith(("data:", "#")), (tag, key, ref[:60])
    assert "url(http" not in page and "@import" not in page
    assert "creativecommons" not in page  # matplotlib's metadata block is dropped


def test_html_lanes_show_the_timeline(page):
    entry = page[page.index('id="i-take_turn-delayed-casual-03"'):]
    entry = entry[:entry.index("</svg>")]
    for lane in html_view.LANES:
        assert f">{lane}</text>" in entry
    assert "<title>2.20-3.40 s: Sure, here is my answer.</title>" in entry
    assert "<title>take_turn window 1.00-3.00 s</title>" in entry
    assert "<title>cue 1.00-1.60 s</title>" in entry
    assert "immediate failure (take_turn-delayed-casual-03)" in page


def test_html_link_mode_and_limit(rep, run_dir, tmp_path):
    out = tmp_path / "sub" / "page.html"
    html_view.write(parsed(rep), out, report_path=run_dir, audio="link")
    p = _parse(out.read_text())
    assert len(p.audio) == 2 * len(FAILED)
    for src in p.audio:
        assert not src.startswith("data:")
        assert (out.parent / src).resolve().is_file()
    limited = _parse(html_view.render(parsed(rep), report_path=run_dir, embed_limit=2))
    assert len(limited.audio) == 4
    none = _parse(html_view.render(parsed(rep), report_path=run_dir, audio="none"))
    assert none.audio == []
    with pytest.raises(html_view.HtmlError):
        html_view.render(parsed(rep), audio="mp3")


def test_html_without_recordings_says_so(rep):
    page = html_view.render(parsed(rep), report_path=Path("/nonexistent/report.json"))
    assert "Recordings of 7 failed instance(s) were not found" in page
    assert "<audio" not in page


def test_embed_choice_spreads_over_conditions():
    failed = [{"id": f"{c}-{k}", "action": c.split(".")[0], "condition": c.split(".")[1]}
              for c in ("wait.continuous_speech", "stop.direct_interruption")
              for k in range(5)]
    chosen = html_view._embed_choice(failed, 4)
    assert chosen == {"wait.continuous_speech-0", "wait.continuous_speech-1",
                      "stop.direct_interruption-0", "stop.direct_interruption-1"}


def test_heatmap_rows_are_one_minus_S(rep):
    labels, values = html_view.heatmap_rows(parsed(rep))
    assert labels[0] == "toy (this run)"
    stop = __import__("pytest_duplexact.data.taxonomy", fromlist=["ACTIONS"]).ACTIONS.index("stop")
    assert values[0][stop] == pytest.approx(20.0)  # S = 4 / 5
    moshi = labels.index("Moshi")
    assert values[moshi][stop] == pytest.approx(29.3)
    assert labels[-1] == "Qwen 3.5-Omni" and len(labels) == 1 + 3 + 14


def test_the_html_summary_reads_as_words(rep):
    """Selection in words (not raw JSON), the model options, the transcriber actually used."""
    import copy

    r = copy.deepcopy(rep)
    r["settings"]["selection"] = {"actions": ["take_turn", "wait"], "conditions": [],
                                  "scenarios": [], "sources": [], "limit": 2, "seed": 7,
                                  "shard": "1/3"}
    r["settings"]["model_options"] = {"ckpt": "step-4000"}
    r["settings"]["transcriber"] = "auto"
    r["usage"] = {"transcriber": {"model": "offline:tiny.en", "calls": 0}}
    page = html_view.render(parsed(r))
    assert "actions: take_turn, wait; at most 2 per condition (seed 7); shard 1/3" in page
    assert "ckpt=step-4000" in page
    assert "auto (used: offline:tiny.en)" in page
    assert '{"actions"' not in page


def test_html_names_a_missing_recording_not_the_embed_limit(rep, tmp_path):
    """An errored instance with no audio says it has no recording, not that the embed limit
    was reached (1 failure against a limit of 60)."""
    report_path = write_run_dir(tmp_path / "run", rep)
    err = next(i for i in rep["instances"] if i.get("error"))
    for f in (report_path.parent / err["recording"]).iterdir():
        if f.suffix in (".wav", ".flac"):
            f.unlink()
    page = html_view.render(parsed(rep), report_path=report_path, embed_limit=60)
    entry = page.split(f'id="i-{err["id"]}"', 1)[1].split('<div class="failure"', 1)[0]
    assert "no recording: the instance ended in an error before any audio was written" in entry
    assert "limit reached" not in page
    linked = html_view.render(parsed(rep), report_path=report_path, audio="link")
    assert "no recording: the instance ended in an error" in linked
