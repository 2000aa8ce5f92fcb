"""Synthetic reports for the view / baseline / merge tests: real build_report output from
hand-made outcomes, and a run directory with the artifacts the HTML view reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.audio import write as write_audio
from pytest_duplexact.data.results import (
    ImmediateResult,
    InstanceOutcome,
    SubsequentResult,
    Verdict,
)
from pytest_duplexact.report.builder import Ran, base
from pytest_duplexact.report.model import Report
from pytest_duplexact.run.settings import RunSettings

SCENARIOS = ("casual", "meeting", "interview")


def settings(**over) -> dict:
    s = {"model": "toy", "model_options": {}, "dataset": "/data/toy",
         "dataset_fingerprint": "f" * 64, "judge": None, "judge_base_url": None,
         "audio_judge": None, "transcriber": "auto", "simulator": "rule",
         "simulator_model": None, "scoring_version": "0.1.0",
         "selection": {"actions": [], "conditions": [], "scenarios": [], "sources": [],
                       "limit": None, "seed": 0, "shard": None}}
    s.update(over)
    return s


def outcome(action: str, condition: str, k: int, i_ok: bool | None, s_ok: bool | None = None,
            timing: float | None = None, error: str | None = None) -> InstanceOutcome:
    """Instance ``<action>-<condition>-<scenario>-<k>``; ``i_ok=None`` = excluded."""
    iid = f"{action}-{condition}-{SCENARIOS[k % 3]}-{k:02d}"
    rec = f"instances/{iid}"
    if error:
        return InstanceOutcome(iid, action, condition, SCENARIOS[k % 3], "synthesized",
                               error=error, recording=rec)
    v = Verdict.EXCLUDED if i_ok is None else Verdict.SUCCESS if i_ok else Verdict.FAILURE
    imm = ImmediateResult(v, f"immediate {v.value} ({iid})", window=(1.0, 3.0),
                          onset=1.5 if i_ok else None)
    sub = None
    if i_ok and s_ok is not None:
        sub = SubsequentResult(Verdict.SUCCESS if s_ok else Verdict.FAILURE,
                               f"follow-through {'kept' if s_ok else 'broke'} ({iid})", "rule")
    return InstanceOutcome(iid, action, condition, SCENARIOS[k % 3], "synthesized", imm, sub,
                           timing if i_ok else None, None, rec)


def outcomes_for(condition_key: str, n: int, successes: int, s_ok=None, timing=None,
                 start: int = 0):
    action, cond = condition_key.split(".")
    return [outcome(action, cond, start + k, k < successes,
                    None if s_ok is None else s_ok(k), timing(k) if timing else None)
            for k in range(n)]


def report(outcomes, model="toy", **settings_over) -> dict:
    """The report as report.json holds it (a stored report, before it is parsed)."""
    stored = RunSettings.from_dict(settings(model=model, **settings_over))
    return json.loads(json.dumps(base(Ran(list(outcomes), stored, model)).to_json()))


def typed(outcomes, model="toy", **settings_over) -> Report:
    """The same report as the views, gates and merge take it: parsed from its JSON."""
    return Report.from_json(report(outcomes, model, **settings_over))


def mixed_report(model="toy") -> dict:
    """A bit of everything: rates with and without S, timings, excluded trials, an error."""
    outs = []
    outs += outcomes_for("wait.inter_sentential_pause", 6, 5)
    outs += outcomes_for("take_turn.delayed", 6, 3)
    outs += outcomes_for("stop.direct_interruption", 5, 5, s_ok=lambda k: k != 1,
                         timing=lambda k: 0.2 + 0.1 * k)
    outs += outcomes_for("recover.revise", 4, 3, timing=lambda k: 0.5 * k)
    outs.append(outcome("hold_floor", "continue", 0, None))
    outs.append(outcome("interrupt", "help", 0, None, error="RuntimeError: boom"))
    return report(outs, model)


def write_run_dir(root: Path, rep: dict, seconds: float = 4.0) -> Path:
    """A run directory holding ``rep`` as report.json plus, for every instance, the two WAV
    files and a timeline.json (what the harness writes)."""
    sr = 16000
    t = np.arange(int(seconds * sr)) / sr
    for inst in rep["instances"]:
        folder = root / inst["recording"]
        folder.mkdir(parents=True, exist_ok=True)
        write_audio(folder / "input.wav", (0.2 * np.sin(2 * np.pi * 220 * t)).astype("f4"))
        write_audio(folder / "output.wav", (0.2 * np.sin(2 * np.pi * 330 * t)).astype("f4"))
        tl = {"user": [[0.3, 2.0]], "duration": seconds,
              "segments": [{"start": 2.2, "end": 3.4, "text": "Sure, here is my answer."},
                           {"start": 3.5, "end": 3.8, "text": "Mm-hm."}],
              "speech": [[2.2, 3.4], [3.5, 3.8]],
              "cue": {"start": 1.0, "end": 1.6, "forced": False}, "user_sent_until": None,
              "events": [[2.0, "user_audio_end"]]}
        (folder / "timeline.json").write_text(json.dumps(tl))
    (root / "report.json").write_text(json.dumps(rep))
    return root / "report.json"


def all_condition_keys() -> list[str]:
    return [c.key for c in taxonomy.CONDITIONS]


def scipy_mcnemar(worse: int, better: int) -> float:
    """The reference for McNemar's exact p-value: scipy's two-sided binomial test on the
    discordant pairs (1 with none)."""
    from scipy.stats import binomtest

    return 1.0 if worse + better == 0 else binomtest(worse, worse + better, 0.5).pvalue


def parsed(rep) -> Report:
    """A stored report (its JSON dict) as the views, gates and merge take it."""
    return Report.from_json(rep)
