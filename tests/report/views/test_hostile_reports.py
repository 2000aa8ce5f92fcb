"""Reports from hostile content: ids and reasons are never markup, judge texts are bounded,
and a hand-damaged report is a clear error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import json

from pytest_duplexact.remote import calls
from pytest_duplexact.report.views import markdown
from pytest_duplexact.report.views import show as report_cli
from tests.report.helpers import mixed_report, parsed


def test_markdown_escapes_html_in_ids_reasons_and_model():
    rep = mixed_report()
    rep["model"] = "evil<img src=x onerror=alert(1)>"
    bad = next(i for i in rep["instances"] if i["immediate"] and
               i["immediate"]["verdict"] == "failure")
    bad["id"] = "x</details><script>alert(1)</script>"
    bad["immediate"]["reason"] = "<b>bold</b> & | pipes"
    text = markdown.render(parsed(rep))
    assert "<script>" not in text and "<img" not in text and "<b>" not in text
    assert "x&lt;/details&gt;&lt;script&gt;" in text
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; \\| pipes" in text
    assert text.count("<details>") == text.count("</details>") == 1


def test_judge_reasons_are_capped_with_a_pointer_to_the_cache():
    assert calls.capped("short") == "short"
    long = "x" * 2_000_000
    out = calls.capped(long)
    assert len(out) < 1100 and out.endswith("[1999000 more characters in the request cache]")


def _args(path, **kw):
    return argparse.Namespace(report=str(path), html=None, markdown=None, baseline=None, **kw)


def test_report_without_summary_is_exit_2_with_the_field(tmp_path, capsys):
    rep = mixed_report()
    del rep["summary"]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rep))
    assert report_cli.main(_args(p)) == 2
    assert "field 'summary' is missing" in capsys.readouterr().err


def test_a_malformed_summary_is_exit_2_not_a_traceback(tmp_path, capsys):
    rep = mixed_report()
    rep["summary"]["actions"] = "oops"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rep))
    assert report_cli.main(_args(p)) == 2
    assert "malformed report" in capsys.readouterr().err
