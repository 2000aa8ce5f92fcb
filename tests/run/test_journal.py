"""The run directory as a journal (pytest_duplexact/run/journal.py, docs/runs.md).

Every file an instance run writes arrives by rename, ``outcome.json`` last; a run stopped
before any of those renames leaves a folder the resume never trusts; and the resume decides
per instance, from the outcome's fingerprint and the files beside it, what to reuse.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data import usage
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.recording_io import RECORDING_FILE, track_file
from pytest_duplexact.judges import JudgePanel
from pytest_duplexact.models.providers.silent import SilentModel
from pytest_duplexact.pipelines.simulator import RuleBasedSimulator
from pytest_duplexact.pytest_plugin.configure import load_resumed
from pytest_duplexact.rules import requires
from pytest_duplexact.run import journal
from pytest_duplexact.run.harness import Harness
from pytest_duplexact.run.journal import Status
from pytest_duplexact.run.rundir import RUN_FILE
from pytest_duplexact.run.settings import IDENTITY_KEYS, SCORING_KEYS, RunSettings

SETTINGS = {
    "model": "silent", "model_options": {}, "dataset": "/data/a",
    "dataset_fingerprint": "d" * 64, "judge": None, "judge_base_url": None,
    "audio_judge": None, "transcriber": "native", "simulator": "rule",
    "simulator_model": None, "scoring_version": "0.1.0",
    "selection": {"actions": [], "conditions": [], "scenarios": [], "sources": [],
                  "limit": None, "seed": 0, "shard": None},
}
FP = RunSettings.from_dict(SETTINGS).fingerprint()


def rs(d: dict) -> RunSettings:
    return RunSettings.from_dict(d)


@pytest.fixture(scope="module")
def instances():
    data = load_dataset(bundled_root(), requires=requires)
    # one instance of each pipeline: direct replay, simulator replay, barge-in
    wanted = ("take_turn", "stop", "interrupt")
    return [next(i for i in data.instances if i.action == a) for a in wanted]


def make_harness(run_dir: Path, model=None) -> Harness:
    return Harness(model=model or SilentModel(), run_dir=run_dir,
                   panel=JudgePanel(), transcriber=None, policy=RuleBasedSimulator(),
                   fingerprint=FP)


class Killed(BaseException):
    """Stands in for SIGKILL / Ctrl-C: not an Exception, so nothing on the way catches it."""


class Renames(list):
    """Every os.replace (the rename of write-then-rename) as (temporary, final) names;
    ``kill_at = k`` makes the k-th rename never happen, as if the process died with the
    temporary fully written."""

    kill_at: int | None = None


@pytest.fixture
def renames(monkeypatch) -> Renames:
    log = Renames()
    real = os.replace

    def replace(src, dst, *a, **kw):
        if log.kill_at is not None and len(log) == log.kill_at:
            raise Killed(f"killed before renaming {Path(dst).name}")
        real(src, dst, *a, **kw)
        log.append((Path(src).name, Path(dst).name))

    monkeypatch.setattr(os, "replace", replace)
    return log


def test_every_file_arrives_by_rename_and_the_outcome_last(tmp_path, instances, renames):
    for inst in instances:
        renames.clear()
        h = make_harness(tmp_path / "run")
        h.run(inst)
        folder = h.instance_dir(inst)
        written = {p.name for p in folder.iterdir()}
        assert written == {dst for _, dst in renames}, "a file was written in place"
        assert all(src.startswith(".") and src.endswith(".part") for src, _ in renames)
        assert renames[-1][1] == journal.OUTCOME_FILE
        assert journal.read_entry(folder, inst.id, FP).status is Status.FINISHED


class CrashingModel(SilentModel):
    def step(self, frame):
        raise RuntimeError("simulated model crash")


def test_an_error_outcome_is_written_last_too(tmp_path, instances, renames):
    inst = instances[0]
    h = make_harness(tmp_path / "run", CrashingModel())
    with pytest.raises(RuntimeError):
        h.run(inst)
    h.error_outcome(inst, RuntimeError("simulated model crash"))
    assert [dst for _, dst in renames] == [journal.ERROR_FILE, journal.OUTCOME_FILE]
    entry = journal.read_entry(h.instance_dir(inst), inst.id, FP)
    assert entry.status is Status.ERROR and "simulated model crash" in entry.why


@pytest.mark.parametrize("which", [0, 1, 2], ids=["direct", "simulator", "barge_in"])
def test_a_run_killed_before_any_rename_is_never_trusted(tmp_path, instances, renames, which):
    """Kill the re-run of a finished instance before each of its renames in turn: the old
    outcome must not survive beside new files, and the resume must re-run the instance."""
    inst = instances[which]
    h = make_harness(tmp_path / "run")
    h.run(inst)
    folder = h.instance_dir(inst)
    n = len(renames)
    for k in range(n):
        renames.clear()
        renames.kill_at = k
        with pytest.raises(Killed):
            h.run(inst)
        entry = journal.read_entry(folder, inst.id, FP)
        assert entry.status is Status.NOT_FINISHED, (k, entry)
        renames.kill_at = None
    renames.clear()
    h.run(inst)  # the resumed attempt
    assert journal.read_entry(folder, inst.id, FP).status is Status.FINISHED
    assert not list(folder.glob(".*.part")), "temporaries of killed attempts left behind"


@pytest.fixture
def finished(tmp_path, instances) -> tuple[Path, str]:
    """A finished direct-replay instance folder and its id."""
    inst = instances[0]
    h = make_harness(tmp_path / "run")
    outcome = h.run(inst)
    folder = h.instance_dir(inst)
    entry = journal.read_entry(folder, inst.id, FP)
    assert entry.status is Status.FINISHED
    stored = {k: v for k, v in entry.outcome.items() if k != journal.USAGE_KEY}
    assert stored == json.loads(json.dumps(outcome.to_dict()))  # as the report has it
    # what the services cost, as usage.delta measures it (all local here: names, no calls)
    assert entry.outcome[journal.USAGE_KEY] == usage.delta(usage.snapshot(h), {})
    return folder, inst.id


def _edit_json(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


def _judge_error(folder: Path) -> None:
    d = json.loads((folder / journal.OUTCOME_FILE).read_text())
    d["subsequent"] = {"verdict": "judge_error", "reason": "timeout", "judge": "x",
                       "evidence": {}}
    (folder / journal.OUTCOME_FILE).write_text(json.dumps(d))


def _short_output(folder: Path) -> None:
    sf.write(str(track_file(folder, "output")), np.zeros(160, np.float32), 16000,
             subtype="PCM_16")


BREAKERS = {
    "truncated outcome": (lambda f: (f / journal.OUTCOME_FILE).write_text('{"id": "x", '),
                          Status.DAMAGED),
    "outcome not an object": (lambda f: (f / journal.OUTCOME_FILE).write_text("[]"),
                              Status.DAMAGED),
    "outcome of another instance": (lambda f: _edit_json(f / journal.OUTCOME_FILE, id="other"),
                                    Status.DAMAGED),
    "other settings": (lambda f: _edit_json(f / journal.OUTCOME_FILE, fingerprint="0" * 64),
                       Status.STALE),
    "no fingerprint (older run)": (
        lambda f: _edit_json(f / journal.OUTCOME_FILE, fingerprint=None), Status.STALE),
    "harness error": (lambda f: _edit_json(f / journal.OUTCOME_FILE, error="RuntimeError: x"),
                      Status.ERROR),
    "judge error": (_judge_error, Status.JUDGE_ERROR),
    "output audio missing": (lambda f: track_file(f, "output").unlink(), Status.DAMAGED),
    "output audio not audio": (lambda f: track_file(f, "output").write_bytes(b"fLaC...."),
                               Status.DAMAGED),
    "output audio of other length": (_short_output, Status.DAMAGED),
    "recording of another instance": (
        lambda f: _edit_json(f / RECORDING_FILE, instance="other"), Status.DAMAGED),
    "recording.json missing": (lambda f: (f / RECORDING_FILE).unlink(), Status.DAMAGED),
    "timeline.json missing": (lambda f: (f / journal.TIMELINE_FILE).unlink(), Status.DAMAGED),
    "timeline.json not JSON": (lambda f: (f / journal.TIMELINE_FILE).write_text("{"),
                               Status.DAMAGED),
    "no outcome": (lambda f: (f / journal.OUTCOME_FILE).unlink(), Status.NOT_FINISHED),
    # wrong field types once crashed the report at the end of every later resume
    "timing not a number": (lambda f: _edit_json(f / journal.OUTCOME_FILE, timing="zz"),
                            Status.DAMAGED),
    "timing NaN": (lambda f: _edit_json(f / journal.OUTCOME_FILE, timing=float("nan")),
                   Status.DAMAGED),
    "unknown condition": (lambda f: _edit_json(f / journal.OUTCOME_FILE, condition="soon"),
                          Status.DAMAGED),
    "usage not an object": (lambda f: _edit_json(f / journal.OUTCOME_FILE, usage=[1, 2]),
                            Status.DAMAGED),
    "verdict unknown": (lambda f: _edit_json(f / journal.OUTCOME_FILE, immediate={
        "verdict": "maybe", "reason": "", "evidence": {}}), Status.DAMAGED),
    "window of strings": (lambda f: _edit_json(f / journal.OUTCOME_FILE, immediate={
        "verdict": "failure", "reason": "", "evidence": {}, "window": ["a", "b"]}),
                          Status.DAMAGED),
}


@pytest.mark.parametrize("name", BREAKERS)
def test_resume_trusts_only_whole_entries(finished, name):
    folder, iid = finished
    breaker, expected = BREAKERS[name]
    breaker(folder)
    entry = journal.read_entry(folder, iid, FP)
    assert entry.status is expected, entry
    assert entry.outcome is None


def test_the_fingerprint_is_what_outcomes_depend_on():
    def fp(**changes):
        s = json.loads(json.dumps(SETTINGS))
        for k, v in changes.items():
            if k in s["selection"]:
                s["selection"][k] = v
            else:
                s[k] = v
        return rs(s).fingerprint()

    # the data's location and which instances are selected do not change an outcome
    assert fp(dataset="/elsewhere") == FP
    assert fp(limit=3, actions=["wait"], shard="1/2") == FP
    # the seed reaches seeded models; every fingerprint key changes it
    assert fp(seed=1) != FP
    # resume refuses an identity change and reports a scoring change: both are fingerprinted
    for key in IDENTITY_KEYS + SCORING_KEYS:
        assert fp(**{key: {"x": "changed"} if key == "model_options" else "changed"}) != FP, key
    # optional: changes it only when present (data with barge-in branch clips)
    assert "bargein_branches" not in SETTINGS
    assert fp(bargein_branches="on") != FP
    assert fp(bargein_branches="on") != fp(bargein_branches="off")
    # each transcriber is its own scoring: outcomes heard by one are never resumed into another
    names = ("auto", "tiny.en", "base", "whisper-1")
    assert len({fp(transcriber=n) for n in names}) == len(names)


def _run_dir_with(tmp_path, instances, settings: dict) -> Path:
    run = tmp_path / "run"
    h = make_harness(run)
    h.fingerprint = rs(settings).fingerprint()
    for inst in instances:
        h.run(inst)
    (run / RUN_FILE).write_text(json.dumps({"settings": settings}))
    return run


def test_load_resumed_reuses_matching_outcomes_and_says_so(tmp_path, instances):
    run = _run_dir_with(tmp_path, instances[:2], SETTINGS)
    ids = {i.id for i in instances}
    done, messages, _ = load_resumed(run, rs(SETTINGS), ids, None)
    assert set(done) == {i.id for i in instances[:2]}
    assert messages == [f"duplexact: resuming {run}: 2 of 3 selected instance(s) finished and "
                        "reused; 1 to run (1 not finished)"]


def test_changed_scoring_settings_invalidate_with_a_warning(tmp_path, instances):
    run = _run_dir_with(tmp_path, instances, SETTINGS)
    now = {**SETTINGS, "judge": "gpt-5.4"}
    done, messages, _ = load_resumed(run, rs(now), {i.id for i in instances}, None)
    assert done == {}
    warning = messages[-1]
    assert "WARNING" in warning and "judge: None -> 'gpt-5.4'" in warning
    assert "3 stored outcome(s)" in warning and "never mixed" in warning


@pytest.mark.parametrize("key", ["model", "model_options", "dataset_fingerprint"])
def test_a_different_run_is_refused(tmp_path, instances, key):
    run = _run_dir_with(tmp_path, instances[:1], SETTINGS)
    with pytest.raises(pytest.UsageError, match=f"different run.*{key}"):
        other = {"other": "1"} if key == "model_options" else "other"
        load_resumed(run, rs({**SETTINGS, key: other}), {instances[0].id}, None)


def test_a_resume_across_channels_names_no_channel_clean(tmp_path, instances):
    """It said ``channel: None -> 'phone'``: a clean run is ``clean``, as the user spells it."""
    run = _run_dir_with(tmp_path, instances[:1], SETTINGS)
    with pytest.raises(pytest.UsageError) as e:
        load_resumed(run, rs({**SETTINGS, "channel": "phone"}), {instances[0].id}, None)
    assert "different run (channel: 'clean' -> 'phone')" in str(e.value)
    assert rs(SETTINGS).identity_changes(rs({**SETTINGS, "channel": "phone"})) == [
        "channel: 'phone' -> 'clean'"]


def test_a_damaged_or_missing_run_file_is_refused(tmp_path, instances):
    run = _run_dir_with(tmp_path, instances[:1], SETTINGS)
    (run / RUN_FILE).write_text('{"settings": ')
    with pytest.raises(pytest.UsageError, match="run.json is damaged"):
        load_resumed(run, rs(SETTINGS), {instances[0].id}, None)
    shutil.rmtree(run)
    with pytest.raises(pytest.UsageError, match="no run.json"):
        load_resumed(run, rs(SETTINGS), {instances[0].id}, None)


def test_an_error_that_cannot_be_journaled_still_reaches_the_report(tmp_path, instances,
                                                                     monkeypatch):
    import errno
    import os

    h = make_harness(tmp_path / "run")
    real = os.replace

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    out = h.error_outcome(instances[0], RuntimeError("boom"))
    monkeypatch.setattr(os, "replace", real)
    assert out.error.startswith("RuntimeError: boom (not journaled: [Errno 28]")
    assert not list((tmp_path / "run").rglob("*.part"))
    assert journal.read_entry(h.instance_dir(instances[0]), instances[0].id,
                              FP).status is Status.NOT_FINISHED  # resume re-runs it


def test_a_resumed_outcome_keeps_its_borderline_flips(tmp_path, instances):
    """outcome.json carries the immediate verdict's borderline flips ([] when none), and the
    journal gives them back as stored, so a resumed run reports them as the first did."""
    inst = instances[0]
    h = make_harness(tmp_path / "run")
    out = h.run(inst)
    assert out.immediate.verdict.counted and out.immediate.borderline == ()
    folder = h.instance_dir(inst)
    path = folder / journal.OUTCOME_FILE
    d = json.loads(path.read_text())
    assert d["borderline"] == []
    flip = {"edge": "onset", "at": 1.0, "shift": 0.1, "segment": 0, "verdict": "success"}
    d["borderline"] = [flip]
    path.write_text(json.dumps(d))
    entry = journal.read_entry(folder, inst.id, FP)
    assert entry.status is Status.FINISHED
    assert entry.outcome["borderline"] == [flip]


LATE_CLOCK = {"input_lag_max_ms": 796.0, "output_lag_max_ms": 0.0, "loop_stall_max_ms": 796.0,
              "tolerance_ms": None, "reruns": 0, "unreliable": False}


def test_a_trial_over_the_resuming_runs_tolerance_is_run_again(tmp_path, instances):
    """Recorded with the tolerance off, 796 ms late: a resume at the default 100 ms runs it
    again (the tolerance is no setting, so the fingerprint alone would reuse it), while a
    resume with the tolerance off, or at 1 s, keeps it."""
    run = _run_dir_with(tmp_path, instances[:1], SETTINGS)
    (outcome,) = run.glob("instances/*/outcome.json")
    _edit_json(outcome, clock=LATE_CLOCK)
    iid = instances[0].id
    entry = journal.read_entry(outcome.parent, iid, FP, 100.0)
    assert entry.status is Status.LATE and entry.outcome is None
    assert "796 ms late, over the tolerance (100 ms)" in entry.why
    assert journal.read_entry(outcome.parent, iid, FP, None).status is Status.FINISHED
    assert journal.read_entry(outcome.parent, iid, FP, 1000.0).status is Status.FINISHED
    done, messages, _ = load_resumed(run, rs(SETTINGS), {iid}, 100.0)
    assert done == {}
    assert "1 over this run's timing tolerance, re-run" in messages[0]
