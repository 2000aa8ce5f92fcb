"""``duplexact report`` and ``duplexact compare`` with output paths that cannot be written
(a folder, under a file, an input report) and with stdout piped to a reader that stops early:
one line naming the path and exit 2, said before anything is read or rendered; the files
written before anything is printed, and a closed pipe no traceback (the exit status kept)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_duplexact
from pytest_duplexact.cli import main as duplexact
from pytest_duplexact.report.views import compare as compare_cli
from pytest_duplexact.report.views import show as report_cli
from tests.report.helpers import mixed_report, outcomes_for, report, write_run_dir

CHECKOUT = Path(pytest_duplexact.__file__).resolve().parents[1]


@pytest.fixture
def where(tmp_path, monkeypatch):
    """A run directory ``run/`` with its report, a file ``afile`` and a folder ``somedir``,
    in the current directory (paths as a user types them)."""
    write_run_dir(tmp_path / "run", mixed_report())
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "somedir").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


BAD = [
    (["report", "run/report.json", "--html", "afile/x.html"],
     "duplexact report: cannot write --html afile/x.html: afile is a file, not a folder"),
    (["report", "run/report.json", "--markdown", "afile/x.md"],
     "duplexact report: cannot write --markdown afile/x.md: afile is a file, not a folder"),
    (["report", "run/report.json", "--html", "somedir"],
     "duplexact report: cannot write --html somedir: somedir is a folder: give a file name, "
     "e.g. --html somedir/report.html"),
    (["report", "run/report.json", "--markdown", "run/report.json"],
     "duplexact report: cannot write --markdown run/report.json: it is the input "
     "run/report.json; give another file name"),
    (["report", "run/report.json", "--html", "same", "--markdown", "same"],
     "duplexact report: cannot write --html same: --markdown writes the same file; give each "
     "its own name"),
    (["compare", "run/report.json", "run/report.json", "--html", "afile/x.html"],
     "duplexact compare: cannot write --html afile/x.html: afile is a file, not a folder"),
    (["compare", "run/report.json", "run/report.json", "--html", "somedir"],
     "duplexact compare: cannot write --html somedir: somedir is a folder: give a file name, "
     "e.g. --html somedir/compare.html"),
]


@pytest.mark.parametrize("argv,said", BAD, ids=[" ".join(a[3:]) + f" ({a[0]})"
                                                 for a, _ in BAD])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(where, capsys, monkeypatch,
                                                                 argv, said):
    def too_late(*a, **kw):
        raise AssertionError("read before the output paths were checked")

    monkeypatch.setattr(report_cli, "read_report", too_late)
    monkeypatch.setattr(compare_cli, "read_report", too_late)
    assert duplexact(argv) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [said] and out == ""
    assert sorted(p.name for p in where.iterdir()) == ["afile", "run", "somedir"]
    assert list((where / "somedir").iterdir()) == []


def test_a_failed_write_after_rendering_is_one_line_too(where, capsys, monkeypatch):
    """A disk that fills while the page is written: the same one line, exit 2, no page."""
    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    assert duplexact(["report", "run/report.json", "--html", "page.html", "--audio",
                      "none"]) == 2
    assert capsys.readouterr().err == ("duplexact report: cannot write page.html: No space "
                                       "left on device\n")
    assert sorted(p.name for p in where.iterdir()) == ["afile", "run", "somedir"]


def _closed_stdout(argv, cwd) -> subprocess.CompletedProcess:
    """``duplexact ARGV`` with stdout a pipe whose reader has already gone (``| head`` that
    stopped reading): every write to it fails with EPIPE."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), *filter(None, [env.get("PYTHONPATH")])])
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", *argv], cwd=cwd,
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=150,
                              env=env)
    finally:
        os.close(write)


def test_report_piped_to_a_closed_reader_still_writes_its_files(where):
    done = _closed_stdout(["report", "run/report.json", "--html", "out/page.html",
                           "--markdown", "out/page.md", "--audio", "none"], where)
    assert (done.returncode, done.stderr) == (0, "")
    assert (where / "out" / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert (where / "out" / "page.md").read_text().startswith("#")


def test_compare_piped_to_a_closed_reader_keeps_its_verdict(tmp_path):
    """B lost all 30 of A's successes: a significant drop, exit 1 even when nobody reads."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(report(outcomes_for("wait.inter_sentential_pause", 30, 30))))
    b.write_text(json.dumps(report(outcomes_for("wait.inter_sentential_pause", 30, 0))))
    done = _closed_stdout(["compare", str(a), str(b), "--html", "cmp.html", "--audio", "none"],
                          tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert "DuplexAct comparison" in (tmp_path / "cmp.html").read_text()


@pytest.mark.parametrize("given,said", [("-3", "must be 0 or more, got -3"),
                                        ("many", "expected a whole number, got 'many'")])
def test_a_negative_or_non_number_embed_limit_is_one_line(where, capsys, given, said):
    with pytest.raises(SystemExit) as e:
        duplexact(["report", "run/report.json", "--html", "p.html", "--embed-limit", given])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and said in err[-1] and "Traceback" not in "\n".join(err)
    assert not (where / "p.html").exists()


def test_an_embed_limit_of_0_embeds_nothing_not_the_default(where, monkeypatch):
    """``--embed-limit 0`` was read as not given (an ``or``): 60 instances embedded."""
    from pytest_duplexact.report.views import html

    seen = []
    real = html.render
    monkeypatch.setattr(html, "render", lambda *a, **k: seen.append(k["embed_limit"]) or
                        real(*a, **k))
    assert duplexact(["report", "run/report.json", "--html", "p0.html",
                      "--embed-limit", "0"]) in (0, 1)
    assert duplexact(["report", "run/report.json", "--html", "p1.html"]) in (0, 1)
    assert seen == [0, html.DEFAULT_EMBED_LIMIT]
