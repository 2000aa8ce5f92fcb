"""A full disk reads as one: ``[Errno 28] No space left on device: '<the file>'``, for the
recordings and converted clips (audio) and every run file (text), never libsndfile's bare
"System error.". The disk is /dev/full behind the write's temporary name."""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import pytest

from pytest_duplexact.data import atomic, audio


@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux)")
    real = tempfile.mkstemp

    def onto_dev_full(*args, **kwargs):  # the temporary every atomic write goes through
        fd, name = real(*args, **kwargs)
        os.close(fd)
        os.unlink(name)
        os.symlink("/dev/full", name)
        return os.open(name, os.O_WRONLY), name

    monkeypatch.setattr(atomic.tempfile, "mkstemp", onto_dev_full)
    return tmp_path


@pytest.mark.parametrize("name", ["output.wav", "output.flac"])
def test_audio_on_a_full_disk_says_so_with_the_path(full_disk, name):
    target = full_disk / name
    with pytest.raises(OSError) as full:
        audio.write(target, np.zeros(1600, dtype=np.float32))
    assert full.value.errno == errno.ENOSPC
    assert "No space left on device" in str(full.value) and str(target) in str(full.value)
    assert not target.exists()


def test_a_run_file_on_a_full_disk_names_the_file(full_disk):
    target = full_disk / "report.json"
    with pytest.raises(OSError, match=f"No space left on device: '{target}'"):
        atomic.write_text(target, "{}" * 10_000)



def test_a_run_file_is_private_and_an_output_the_user_names_is_not(tmp_path):
    """A run's own files are its owner's (0600, docs/runs.md); a page the user asks for with
    --html gets the mode a plain write would (report/output.py)."""
    from pytest_duplexact.report.output import write_output

    atomic.write_text(tmp_path / "report.json", "{}")
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o600
    write_output(tmp_path / "page.html", "<p>", "--html")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "page.html").stat().st_mode & 0o777 == 0o666 & ~mask == atomic.FILE_MODE
