"""The robustness section (report/sections/robustness.py): action x channel I rates over a model's
runs under several channels, tested against the clean run, in report.json, the terminal, the
Markdown and the HTML page, from the run store."""

from __future__ import annotations

import json

from pytest_duplexact.report.model import Report
from pytest_duplexact.report.sections import robustness
from pytest_duplexact.report.views.html import render as html
from pytest_duplexact.report.views.markdown import render as markdown
from pytest_duplexact.report.views.terminal import render as terminal
from tests.report.helpers import outcomes_for, parsed, report


def _run(successes: int, channel: str | None, created: str, model: str = "toy") -> Report:
    outs = outcomes_for("take_turn.delayed", 20, successes)
    outs += outcomes_for("wait.inter_sentential_pause", 20, 18)
    rep = report(outs, model, **({"channel": channel} if channel else {}))
    return Report.from_json(dict(rep, created=created))


def test_channels_side_by_side_with_their_tests():
    clean = _run(18, None, "2026-01-01T00:00:00Z")
    echo = _run(2, "echo:-6@50", "2026-01-02T00:00:00Z")
    phone_old = _run(10, "phone", "2026-01-01T00:00:00Z")
    phone = _run(17, "phone", "2026-01-03T00:00:00Z")
    other_model = _run(0, "phone", "2026-01-04T00:00:00Z", model="other")
    sec = robustness.section(parsed(echo), [clean, phone_old, phone, other_model])
    assert [r["channel"] for r in sec["channels"]] == ["clean", "echo:-6@50", "phone"]
    by = {r["channel"]: r for r in sec["channels"]}
    assert by["echo:-6@50"]["actions"]["take_turn"]["mark"] == "*"  # 18 -> 2 of 20, paired
    assert by["echo:-6@50"]["flips_to_failure"] == 16
    assert by["phone"]["actions"]["take_turn"]["mark"] == ""  # the newest phone run: 17
    assert by["phone"]["actions"]["take_turn"]["rate"] == 17 / 20
    assert by["clean"]["pairing"] is None
    table = "\n".join(robustness.markdown(sec))
    assert "| `echo:-6@50` | 90 [70, 97] (20) | 10* [3, 30] (20) | 16 / 0 |" in table
    json.dumps(sec)  # plain JSON


def test_one_channel_is_no_section():
    assert robustness.section(parsed(_run(18, None, "a")), [_run(3, None, "b")]) is None


def test_every_view_shows_it():
    clean, echo = _run(18, None, "a"), _run(2, "echo:-6@50", "b")
    rep = echo.replace(robustness=robustness.section(parsed(echo), [clean]))
    back = Report.from_json(json.loads(json.dumps(rep.to_json())))
    assert back.robustness == rep.robustness
    assert "Robustness: I by channel" in "\n".join(terminal(back))
    assert "### Robustness: I by channel" in markdown(back)
    page = html(back)
    assert 'id="robustness"' in page and "echo:-6@50" in page


def test_a_store_of_reports(tmp_path):
    from pytest_duplexact.report.store.saved import save

    store = tmp_path / "store"
    for rep in (_run(18, None, "a"), _run(2, "echo:-6@50", "b")):
        save(parsed(rep), store)
    (store / "0003_broken_x.json").write_text("{")
    stored = robustness.stored_reports(store)
    assert len(stored) == 2
    current = _run(17, "phone", "c")
    sec = robustness.section(parsed(current), stored)
    assert [r["channel"] for r in sec["channels"]] == ["clean", "echo:-6@50", "phone"]


def test_a_stored_shard_is_not_its_channels_run():
    """A shard (--duplexact-shard) holds part of its channel's instances: the section never
    takes it for that channel's run (its merge is the run)."""
    clean, echo = _run(18, None, "a"), _run(2, "echo:-6@50", "b")
    shard = Report.from_json(dict(_run(0, "phone", "c").to_json(), settings=dict(
        _run(0, "phone", "c").settings, selection=dict(clean.settings["selection"],
                                                       shard="1/2"))))
    sec = robustness.section(parsed(echo), [clean, shard])
    assert [r["channel"] for r in sec["channels"]] == ["clean", "echo:-6@50"]


def test_a_store_that_is_not_there_is_said_not_read_as_no_other_channel(tmp_path, capsys):
    """`--store nostore` (a typo) read as an empty store, and the advice was to run again
    under another channel; the merge's --store left the section out without a word."""
    import argparse

    from pytest_duplexact.report.store.merge import main as merge_main

    path = tmp_path / "report.json"
    path.write_text(json.dumps(report(outcomes_for("wait.inter_sentential_pause", 3, 2))))
    args = argparse.Namespace(reports=[str(path)], store=str(tmp_path / "nostore"), alpha=0.05)
    assert robustness.main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"duplexact robustness: --store {tmp_path / 'nostore'}: no such "
                           "folder; give the run store (--duplexact-storage's folder, default "
                           ".duplexact)")
    out = tmp_path / "m.json"
    assert merge_main(argparse.Namespace(reports=[str(path)], output=str(out),
                                         store=str(path))) == 2
    assert capsys.readouterr().err.strip() == (
        f"duplexact merge: --store {path}: a file, not a folder; give the run store the "
        "shards' runs were kept in (default .duplexact)")
    assert not out.exists()
