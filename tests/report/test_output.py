"""report/output.py: an output path a user named is checked before any work and written whole
(or not at all), every failure one message naming the path; stdout whose reader closed it
ends the printing quietly."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_duplexact
from pytest_duplexact.data import atomic
from pytest_duplexact.report import output
from pytest_duplexact.report.output import OutputError, output_problem, write_output

CHECKOUT = Path(pytest_duplexact.__file__).resolve().parents[1]


def test_a_path_that_can_take_the_file_is_no_problem(tmp_path):
    assert output_problem(tmp_path / "page.html", "--html") is None
    assert output_problem(tmp_path / "new" / "deeper" / "page.html", "--html") is None
    (tmp_path / "old.html").write_text("before")
    assert output_problem(tmp_path / "old.html", "--html") is None  # replaced, as before


def test_a_folder_names_itself_and_suggests_a_file_name(tmp_path):
    said = output_problem(tmp_path, "--markdown", "report.md")
    assert said == (f"cannot write --markdown {tmp_path}: {tmp_path} is a folder: give a file "
                    f"name, e.g. --markdown {tmp_path / 'report.md'}")


@pytest.mark.parametrize("under", ["x.html", "sub/x.html", "sub/deeper/x.html"])
def test_a_parent_that_is_a_file_is_named(tmp_path, under):
    afile = tmp_path / "afile"
    afile.write_text("")
    said = output_problem(afile / under, "--html")
    assert said == f"cannot write --html {afile / under}: {afile} is a file, not a folder"


def test_a_parent_that_is_a_link_to_nothing_is_named(tmp_path):
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    said = output_problem(tmp_path / "gone" / "x.html")
    assert said == f"cannot write {tmp_path / 'gone' / 'x.html'}: {tmp_path / 'gone'} is a " \
                   "link to nothing"


def test_an_input_file_is_never_the_output(tmp_path, monkeypatch):
    report = tmp_path / "run" / "report.json"
    report.parent.mkdir()
    report.write_text("{}")
    monkeypatch.chdir(report.parent)  # the same file by another name
    said = output_problem("report.json", "--markdown", inputs=[report])
    assert said == f"cannot write --markdown report.json: it is the input {report}; give " \
                   "another file name"


def test_a_folder_without_permission_is_named(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access  # as a user's read-only folder answers (root's answer is always yes)
    monkeypatch.setattr(output.os, "access",
                        lambda p, mode: False if Path(p) == locked else real(p, mode))
    said = output_problem(locked / "sub" / "x.html", "--html")
    assert said == f"cannot write --html {locked / 'sub' / 'x.html'}: no permission to write " \
                   f"in {locked}"


def test_write_output_makes_the_folders_and_a_plain_files_mode(tmp_path):
    out = tmp_path / "a" / "b" / "page.html"
    assert write_output(out, "h\u00e9llo", "--html") == out
    assert out.read_text(encoding="utf-8") == "h\u00e9llo"
    # not the temporary file's private 0600: the process's umask applied, as open() does
    assert out.stat().st_mode & 0o777 == atomic.FILE_MODE
    assert sorted(p.name for p in out.parent.iterdir()) == ["page.html"]


def test_write_output_refuses_before_writing(tmp_path):
    (tmp_path / "afile").write_text("kept")
    with pytest.raises(OutputError, match="afile is a file, not a folder"):
        write_output(tmp_path / "afile" / "x.html", "page", "--html")
    assert (tmp_path / "afile").read_text() == "kept"


def test_a_failed_write_is_one_message_and_leaves_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "page.html"
    out.write_text("the old page")

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OutputError) as e:
        write_output(out, "the new page", "--html")
    assert str(e.value) == f"cannot write --html {out}: No space left on device"
    assert isinstance(e.value, OSError)
    assert out.read_text() == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]  # no temporary left


def test_print_lines_to_a_closed_pipe_ends_quietly():
    """In a child whose stdout's reader is gone: no traceback, no 'Exception ignored' at its
    exit's flush, and the code after the printing still runs."""
    code = ("import sys\nfrom pytest_duplexact.report.output import print_lines\n"
            "ok = print_lines(['x' * 100] * 10_000)\n"
            "print('after', file=sys.stderr)\nprint('more')\nsys.exit(0 if ok is False else 5)\n")
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-c", code], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60, env=_env())
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "after\n")


def test_print_lines_prints_every_line(capsys):
    assert output.print_lines(["one", "two"]) is True
    assert capsys.readouterr().out == "one\ntwo\n"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_a_folder_that_cannot_be_looked_into_is_one_line(tmp_path, monkeypatch):
    """Path.exists and is_dir raise PermissionError for EACCES (root is never refused one,
    so the refusal is simulated): the shared parent check says so instead of raising, for
    --html as for the run store (saved.store_problem) and import's --out."""
    import os as os_module

    locked = tmp_path / "locked"
    real_stat = os_module.stat

    def stat(path, *a, **kw):
        if str(path).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(os_module, "stat", stat)
    said = output_problem(locked / "sub" / "x.html", "--html")
    assert said == (f"cannot write --html {locked / 'sub' / 'x.html'}: cannot look into "
                    f"{locked / 'sub'} (Permission denied)")
