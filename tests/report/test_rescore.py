"""``duplexact rescore RUN --transcriber=NAME`` (cli/rescore.py): a finished run's recordings
heard by another transcriber, in a new run folder, with no model call, compared with the
original instance by instance. whisper-1 is the fake transcription server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

# The VAD's native modules, imported once here (see test_runs.py: an in-process pytester run
# drops the modules it imported, and torch cannot be imported twice into one process).
import silero_vad  # noqa: F401
import torch  # noqa: F401

from pytest_duplexact.cli import main as duplexact
from pytest_duplexact.run.settings import RunSettings
from tests.fakes.openai_server import Transcript
from tests.judges.judgekit import FAKE_KEY

ONE = ("--duplexact-condition=interrupt.help", "--duplexact-limit=1", "-p",
       "no:cacheprovider", "-q")
MURMUR = [("Mm-hmm.", 0.0, 0.4)]


def test_whisper_1_rescores_an_oracle_run_and_shows_the_flip(pytester, openai_server,
                                                            monkeypatch, capfd):
    res = pytester.runpytest("--duplexact-model=oracle", "--duplexact-run-dir=orig", *ONE)
    res.assert_outcomes(passed=1)
    orig = pytester.path / "orig"
    # the oracle's interruption, heard as a murmur: a backchannel, not an interruption
    openai_server.responder = lambda rec: Transcript(MURMUR)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("DUPLEXACT_TRANSCRIBE_BASE_URL", openai_server.url)
    capfd.readouterr()
    code = duplexact(["rescore", str(orig), "--transcriber=whisper-1"])
    out = capfd.readouterr().out
    assert code == 0, out  # one flip: not a significant drop
    new = pytester.path / "orig-whisper-1"
    assert f"duplexact rescore: {orig} heard by whisper-1 (was auto), no model call" in out
    assert "Flips (1):" in out and "interrupt-help" in out
    assert "success->failure" in out
    # only the transcriber was asked, once per segment the oracle spoke
    assert openai_server.requests and {r.endpoint for r in openai_server.requests} == {
        "audio/transcriptions"}
    report = json.loads((new / "report.json").read_text())
    assert report["settings"]["transcriber"] == "whisper-1"
    assert report["settings"]["model"] == f"recorded:{orig}"
    (inst,) = (new / "instances").iterdir()
    timeline = json.loads((inst / "timeline.json").read_text())
    assert [s["text"] for s in timeline["segments"]] == ["Mm-hmm."] * len(
        timeline["segments"])
    # the original is untouched, and a second rescore gets a folder of its own
    assert json.loads((orig / "report.json").read_text())["settings"]["transcriber"] == "auto"


def test_a_transcriber_nothing_answers_at_stops_the_rescore_after_three(pytester, monkeypatch,
                                                                       capfd):
    """Every instance spent its retries (about 7 s) on a transcriber whose address nothing
    answered at, for the whole run; the run now stops after LOST_AFTER in a row, as for a
    model's server, and says what to check."""
    import socket

    res = pytester.runpytest("--duplexact-model=oracle", "--duplexact-run-dir=orig",
                             "--duplexact-condition=interrupt.help,interrupt.safety",
                             "--duplexact-limit=2", "-p", "no:cacheprovider", "-q")
    res.assert_outcomes(passed=4)
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("DUPLEXACT_TRANSCRIBE_BASE_URL", f"http://127.0.0.1:{port}/v1")
    capfd.readouterr()
    code = duplexact(["rescore", str(pytester.path / "orig"), "--transcriber=whisper-1"])
    out = capfd.readouterr().out
    assert code != 0
    assert "duplexact: a remote service cannot be reached (3 instances in a row could not " \
        "connect: transcriber whisper-1: no usable answer after" in out, out
    assert "check its URL and the network, then pytest --duplexact-resume=" in out
    assert out.count("ERROR ") == 3  # the fourth instance never ran
    # each one with its reason, after the run (its short summary line is cut to the
    # terminal's width: '- Transcription...')
    said = out.split("duplexact rescore: 3 instance(s) ended in an error:\n", 1)[1]
    assert said.count(": TranscriptionError: transcriber whisper-1: no usable answer after "
                      "4 attempt(s); last: connection error") == 3, out
    assert "Traceback" not in out


def _fake_run(folder, report=True):
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(
        {"settings": RunSettings(model="oracle").to_dict()}))
    (folder / "instances").mkdir()
    if report:
        (folder / "report.json").write_text("{}")
    return folder


@pytest.mark.parametrize("case,said", [
    ("no folder", "no such folder; give a run directory"),
    ("a file", "a file, not a folder; give a run directory"),
    ("no run.json", "not a DuplexAct run directory (no run.json)"),
    ("unfinished", "the run has no report.json or no recordings; finish it first: "
                   "pytest --duplexact-resume="),
    ("unknown", "--transcriber=small: unknown transcriber 'small'; known: offline, tiny.en"),
    ("auto", "--transcriber=auto: name the transcriber that should hear the recordings"),
    ("no key", "--transcriber=whisper-1: no API key: set the OPENAI_API_KEY environment "
               "variable"),
    ("out not empty", "--out {tmp}/busy: exists and is not empty; give a new or empty folder "
                      "with --out DIR (nothing is written over files)"),
    # a file said "already holds files"
    ("out a file", "--out {tmp}/afile: a file, not a folder; give a new or empty folder with "
                   "--out DIR"),
    ("html under a file", "cannot write --html {tmp}/afile/x.html: {tmp}/afile is a file, "
                          "not a folder"),
    ("html a folder", "cannot write --html {tmp}/busy: {tmp}/busy is a folder: give a file "
                      "name, e.g. --html {tmp}/busy/compare.html"),
])
def test_mistakes_are_one_line_and_exit_4(tmp_path, monkeypatch, capsys, case, said):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run, name, extra = tmp_path / "run", "tiny.en", []
    if case == "no run.json":
        run.mkdir()
    elif case == "a file":  # it said "no such folder" of a file too
        run.write_text("")
    elif case != "no folder":
        _fake_run(run, report=case != "unfinished")
    name = {"unknown": "small", "auto": "auto", "no key": "whisper-1"}.get(case, name)
    if case == "out not empty":
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "x").write_text("")
        extra = ["--out", str(tmp_path / "busy")]
    elif case == "out a file":
        (tmp_path / "afile").write_text("")
        extra = ["--out", str(tmp_path / "afile")]
    elif case == "html under a file":  # said before the re-scoring run, not after it
        (tmp_path / "afile").write_text("")
        extra = ["--html", str(tmp_path / "afile" / "x.html")]
    elif case == "html a folder":
        (tmp_path / "busy").mkdir()
        extra = ["--html", str(tmp_path / "busy")]
    code = duplexact(["rescore", str(run), f"--transcriber={name}", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    said = said.format(tmp=tmp_path)
    assert code == 4
    assert len(err) == 1 and err[0].startswith("duplexact rescore: ") and said in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"run", "busy", "afile"} & {p.name for p in tmp_path.iterdir()})  # nothing new made
