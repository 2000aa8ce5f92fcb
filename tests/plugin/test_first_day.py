"""The newcomer's first day (issue 24, item 3), run as a user runs it: real pytest processes in
a scratch folder, commands typed as the docs and the plugin's own messages print them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pytest_duplexact.cli import main
from pytest_duplexact.run.selection import shard_of
from tests.support.inner_runs import as_user
from tests.support.runs import read_report

# silent never speaks: no VAD, no transcriber, so each run is about the time of pytest's start
SILENT = ["--duplexact-model=silent", "-p", "no:cacheprovider"]
TWO_CONDITIONS = "--duplexact-condition=take_turn.delayed,take_turn.immediate"


# In process (a subprocess start costs seconds on a shared machine): each run builds its own
# config and session, as a new pytest process does. A user's folder has no asyncio ini.
run = as_user()


def test_the_resume_hint_works_as_printed_and_a_shard_stays_that_shard(pytester):
    first = run(pytester, *SILENT, TWO_CONDITIONS, "--duplexact-shard=1/2",
                "--duplexact-run-dir=run", "-x")
    assert first.ret == 1
    hint = re.search(r"pytest --duplexact-resume=\S+", first.stdout.str())
    assert hint, first.stdout.str()  # "... have no outcome ...; pytest --duplexact-resume=..."
    # typed as printed: nothing else on the command line
    second = run(pytester, *shlex.split(hint.group(0))[1:])
    out = second.stdout.str()
    assert second.ret == 1, out + second.stderr.str()  # silent misses every take_turn
    # the run's own model and selection, said once
    assert "run's own settings" in out and "--duplexact-model=silent" in out
    assert "--duplexact-shard=1/2" in out
    report = read_report(pytester.path / "run")
    ids = [o["id"] for o in report["instances"]]
    assert report["model"] == "silent" and report["settings"]["selection"]["shard"] == "1/2"
    assert len(ids) > 1 and all(shard_of(i, 2) == 1 for i in ids)  # never widened
    assert f"1 of {len(ids)} selected instance(s) finished and reused" in out
    second.assert_outcomes(failed=len(ids))
    assert not [n for n in report["notes"] if "no outcome" in n]


def test_a_resume_that_cannot_know_the_model_says_what_is_missing(pytester):
    res = run(pytester, "--duplexact-resume=nowhere")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "no such folder" in res.stderr.str()
    Path(pytester.path, "empty").mkdir()
    res = run(pytester, "--duplexact-resume=empty")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "no run.json there, so the model and selection of that run are unknown" in \
        res.stderr.str()
    Path(pytester.path, "old").mkdir()
    Path(pytester.path, "old", "run.json").write_text(json.dumps({"settings": {}}))
    res = run(pytester, "--duplexact-resume=old")
    err = res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "settings.model" in err and "--duplexact-model=NAME" in err


def test_resuming_a_file_says_it_is_a_file_not_a_run_directory(pytester):
    """Before: "no such folder", though the path exists."""
    Path(pytester.path, "afile").write_text("not a run\n")
    res = run(pytester, "--duplexact-resume=afile")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    [line] = [ln for ln in res.stderr.str().splitlines() if ln.strip()]  # one line
    assert "--duplexact-resume=afile: a file, not a run directory; give the folder a run " \
        "printed as 'run directory' (it holds run.json)" in line, line
    assert "no such folder" not in line


def test_a_bad_option_value_is_refused_before_any_run_directory_exists(pytester):
    pytester.makepyfile(my_model="""
        from pytest_duplexact.models.providers.silent import SilentModel

        def factory(frames: int = 3, loud: bool = False, label: str = "x"):
            return SilentModel()
    """)
    cases = [("endpoint", "silence_s=fast", "a number"),
             ("my_model:factory", "frames=2.5", "an integer"),
             ("my_model:factory", "loud=perhaps", "true or false")]
    for model, option, expected in cases:
        res = run(pytester, f"--duplexact-model={model}", f"--duplexact-model-option={option}")
        err = res.stderr.str()
        assert res.ret == pytest.ExitCode.USAGE_ERROR, err
        [line] = [ln for ln in err.splitlines() if ln.strip()]  # one line, no traceback
        name = option.split("=")[0]
        assert f"option {option}: expected {expected}" in line and name in line
        assert not Path(pytester.path, "duplexact-runs").exists()
    ok = run(pytester, "--duplexact-model=my_model:factory",
             "--duplexact-model-option=frames=2", "--duplexact-model-option=label=fast",
             "--duplexact-condition=take_turn.delayed", "--duplexact-limit=1")
    assert ok.ret == 1  # the values fit: the run runs (and silent misses)


def test_usage_messages_say_what_was_meant(pytester):
    res = run(pytester, "--duplexact-model=oracel")
    assert "did you mean 'oracle'?" in res.stderr.str()
    res = run(pytester, *SILENT, "--duplexact-condition=immediat")
    err = res.stderr.str()
    assert "did you mean 'immediate'?" in err and "slight_overlap" in err  # the valid ones
    res = run(pytester, *SILENT, "--duplexact-data=no/such/folder")
    err = res.stderr.str()
    assert "no such folder" in err and "missing dataset.json" not in err


def test_a_report_that_cannot_be_written_says_why_not_no_room(pytester, monkeypatch):
    """A report path that became a folder during the run (the check before it had passed:
    tests/plugin/test_unusable_folders.py) is said as such at the end, not as a full disk."""
    from pytest_duplexact.pytest_plugin import preflight

    monkeypatch.setattr(preflight, "check_report_path", lambda run: None)
    Path(pytester.path, "taken").mkdir()  # the report path is a folder: not a full disk
    res = run(pytester, *SILENT, "--duplexact-condition=take_turn.delayed",
              "--duplexact-limit=1", "--duplexact-run-dir=run", "--duplexact-report=taken")
    out = res.stdout.str()
    assert "could not write taken" in out and "there is room" not in out
    assert "once taken is not a folder, pytest --duplexact-resume=" in out


def test_a_missing_folder_is_not_called_a_full_disk():
    import errno

    from pytest_duplexact.pytest_plugin.session import _once_fixed

    gone = FileNotFoundError(errno.ENOENT, "No such file or directory")
    assert _once_fixed(gone, Path("out/r.json")) == "once out exists"
    assert _once_fixed(OSError(errno.ENOSPC, "full"), Path("r.json")) == "once there is room"


def test_a_failure_carries_its_onset_into_outcome_json_and_the_page(pytester):
    """endpoint answers 0.7 s after the user: outside take_turn.immediate's [0, 0.5] s."""
    res = run(pytester, "--duplexact-model=endpoint", "--duplexact-condition=take_turn.immediate",
              "--duplexact-limit=1", "--duplexact-run-dir=run", "-p", "no:cacheprovider")
    assert res.ret == 1
    [outcome] = Path(pytester.path, "run").glob("instances/*/outcome.json")
    imm = json.loads(outcome.read_text())["immediate"]
    assert imm["verdict"] == "failure" and "outside" in imm["reason"]
    assert imm["onset"] is not None and imm["window"][1] < imm["onset"]
    assert main(["report", "run/report.json", "--html", "page.html"]) == 0
    page = Path(pytester.path, "page.html").read_text()
    assert "the dashed red line is the rule's onset" in page
    assert re.search(r'stroke-dasharray="3,2"><title>rule onset \d+\.\d+ s</title>', page)


def test_the_resume_hint_keeps_concurrency_and_batch(pytester):
    """How the run ran (concurrency, batch) is not in run.json (it changes no verdict), so
    the printed command carries it: a resume at 1 in flight took four times as long."""
    first = run(pytester, *SILENT, TWO_CONDITIONS, "--duplexact-run-dir=run", "-x",
                "--duplexact-concurrency=3", "--duplexact-batch=2")
    assert first.ret == 1
    out = first.stdout.str()
    hint = re.search(r"pytest --duplexact-resume=.*? runs them", out)
    assert hint, out
    words = shlex.split(hint.group(0))[1:-2]
    assert words[1:] == ["--duplexact-concurrency=3", "--duplexact-batch=2"], words
    second = run(pytester, *words)
    assert second.ret == 1, second.stdout.str()  # silent misses every take_turn
    assert "batched stepping" in second.stdout.str()  # ran at B = 2 again
    plain = run(pytester, *SILENT, TWO_CONDITIONS, "--duplexact-run-dir=run2", "-x")
    assert re.search(r"pytest --duplexact-resume=\S+ runs them", plain.stdout.str())
