"""The judges are shown the model's own words (docs/judges.md, "Prompt fields"): where a judge
prompt cuts the model's speech at an instant (recover: the cue's start; hold_floor: the cue's
end), a segment sounding at that instant is split by its timed words, not by a guess in
proportion to time. A real plugin run with the oracle (native time-aligned transcript) against
the fake judge server; the requests it received are compared with the recording's words.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAI
from tests.support.inner_runs import as_user

inproc = as_user()

# prompt line -> (cue edge the prompt cuts at)
CUTS = {"Interrupted contribution (what the model was saying): ": "start",
        "Model speech before and during the cue: ": "end"}


def _said_before(folder: Path, edge: str) -> str:
    rec = json.loads((folder / "recording.json").read_text())
    cue = json.loads((folder / "timeline.json").read_text())["cue"]
    return " ".join(w["text"] for w in rec["transcript"] if w["start"] < cue[edge])


@pytest.mark.slow
def test_judges_get_the_model_words_before_the_cut(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-words-0000")
    with FakeOpenAI() as server:
        res = inproc(
            pytester, "--duplexact-model=oracle", "--duplexact-action=recover,hold_floor",
            "--duplexact-judge=gpt-5.4", "--duplexact-audio-judge=off",
            f"--duplexact-judge-base-url={server.url}", "--duplexact-run-dir=run",
            "-p", "no:cacheprovider")
        requests = server.chat_requests
    assert res.ret == 0, res.stdout.str()[-3000:]
    by_id = {}
    for r in requests:
        user = next(m["content"] for m in r.json["messages"] if m["role"] == "user")
        for line, edge in CUTS.items():
            m = re.search(re.escape(line) + r"(.*)\n", user)
            if m:
                by_id[m.group(1), edge] = user
    checked = split = 0
    for folder in sorted((pytester.path / "run" / "instances").iterdir()):
        outcome = json.loads((folder / "outcome.json").read_text())
        fields = ((outcome.get("subsequent") or {}).get("evidence") or {}).get("fields")
        if not fields or "answer" not in outcome["subsequent"]["evidence"]:
            continue  # not sent to the judge (excluded, or no speech after the cue)
        key, edge = (("interrupted_contribution", "start") if outcome["action"] == "recover"
                     else ("model_through_cue", "end"))
        expected = _said_before(folder, edge)
        assert fields[key] == expected, folder.name
        assert (expected, edge) in by_id, f"{folder.name}: no request showed {expected!r}"
        checked += 1
        tl = json.loads((folder / "timeline.json").read_text())
        cut = tl["cue"][edge]
        split += any(s["start"] < cut < s["end"] for s in tl["segments"])
    # recover (18) and hold_floor (15) minus exclusions; some segments straddle the cut
    assert checked >= 10 and split >= 1, (checked, split)
