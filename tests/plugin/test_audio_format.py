"""--duplexact-audio-format: a run stores its recordings as FLAC by default, as WAV on request,
and recorded:DIR re-scores either to the same timelines.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()

ONE = ["--duplexact-condition=take_turn.immediate", "--duplexact-limit=1", "-p",
       "no:cacheprovider"]


def folders(run: Path) -> list[Path]:
    return sorted((run / "instances").iterdir())


def test_flac_by_default_wav_by_option_and_recorded_reads_both(pytester):
    first = inproc(pytester, "--duplexact-model=oracle", "--duplexact-run-dir=run1",
                   *ONE)
    first.assert_outcomes(passed=1)
    again = inproc(
        pytester,
        f"--duplexact-model=recorded:{pytester.path / 'run1'}", "--duplexact-run-dir=run2",
        "--duplexact-audio-format=wav", *ONE)
    again.assert_outcomes(passed=1)
    (a,), (b,) = folders(pytester.path / "run1"), folders(pytester.path / "run2")
    names = lambda f: sorted(p.name for p in f.iterdir())  # noqa: E731
    assert names(a) == ["input.flac", "outcome.json", "output.flac", "recording.json",
                        "timeline.json"]
    assert names(b) == ["input.wav", "outcome.json", "output.wav", "recording.json",
                        "timeline.json"]
    # the WAV run re-scored the FLAC recordings: same samples, so the same timeline
    assert json.loads((a / "timeline.json").read_text()) == \
        json.loads((b / "timeline.json").read_text())
    assert (a / "output.flac").stat().st_size * 3 < (b / "output.wav").stat().st_size


def test_an_unknown_audio_format_is_a_usage_error(pytester):
    res = inproc(pytester, "--duplexact-model=silent",
                 "--duplexact-audio-format=mp3", *ONE)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--duplexact-audio-format='mp3': use flac or wav" in res.stderr.str()
