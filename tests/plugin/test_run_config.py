"""The options read once into a RunConfig (pytest_plugin/config.py), and the session leaving the
plugin manager at unconfigure, as pytest's LogXML does."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from pytest_duplexact.pytest_plugin.config import RunConfig
from pytest_duplexact.pytest_plugin.options import BY_NAME, OPTIONS
from pytest_duplexact.run.harness import RunKnobs
from pytest_duplexact.run.selection import Selection

# options read into a composite field rather than a field of their own name
_INTO = {"model-option": "model_options", "gate": "gates",
         **{name: "selection" for name in ("action", "condition", "scenario", "source",
                                          "corpus", "limit", "seed", "shard")}}


class _Config:
    """What RunConfig.from_pytest reads of pytest's config: these command-line values, no
    ini file."""

    def __init__(self, where: Path, **given):
        self.invocation_params = type("P", (), {"dir": where})()
        self.stash = {}  # options.get looks here for what a resume took from run.json
        self._given = {BY_NAME[k.replace("_", "-")].dest: v for k, v in given.items()}

    def getoption(self, dest):
        return self._given.get(dest)

    def getini(self, name):
        return ""


def test_every_option_has_its_field():
    names = {f.name for f in fields(RunConfig)}
    missing = [o.name for o in OPTIONS if _INTO.get(o.name, o.name.replace("-", "_"))
               not in names]
    assert missing == []


def test_nothing_set_reads_as_the_defaults(tmp_path):
    """The field defaults are options.py's, so a RunConfig built in a test is an unset run."""
    assert RunConfig.from_pytest(_Config(tmp_path)) == RunConfig(invocation_dir=tmp_path)
    for o in OPTIONS:
        field_name = o.name.replace("-", "_")
        if o.default is not None and o.name not in _INTO:
            assert getattr(RunConfig(), field_name) == o.default, o.name
    assert RunConfig().knobs() == RunKnobs(judge_timeout=150.0)


def test_values_are_parsed_once(tmp_path):
    run = RunConfig.from_pytest(_Config(
        tmp_path, model="silent", model_option=["k = v", "k=w", "url=https://u:p@h/x"],
        action=["wait,take_turn"], limit="2", seed="7", shard="2/3", gate=["wait.I>=0.5"],
        audio_format=" WAV ", bargein_branches="off", concurrency="3", timeout="5",
        cache_dir="c"))
    assert run.model_options[0] == ("k", "w")  # the last value of a key wins
    assert "p@" not in repr(run.model_options)  # a URL's password never shows
    assert run.selection == Selection(actions=("wait", "take_turn"), limit=2, seed=7,
                                      shard=(2, 3))
    assert [g.metric for g in run.gates] == ["I"]
    assert run.knobs() == RunKnobs(concurrency=3, timeout=5.0, judge_timeout=150.0,
                                   cache_dir=Path("c"), audio_format="wav",
                                   bargein_branches=False)


@pytest.mark.parametrize("given,msg", [
    ({"limit": "x"}, "--duplexact-limit / duplexact_limit: expected an integer, got 'x'"),
    ({"shard": "half"}, "duplexact selection: shard must look like K/N"),
    ({"audio_format": "mp3"}, "--duplexact-audio-format='mp3': use flac or wav"),
    ({"bargein_branches": "maybe"}, "--duplexact-bargein-branches: use 'on' or 'off'"),
    ({"model_option": ["novalue"]}, "--duplexact-model-option expects KEY=VALUE"),
    ({"batch": "x"}, "--duplexact-batch / duplexact_batch: expected an integer"),
    ({"batch": "0"}, "--duplexact-batch must be >= 1 and at most 1024, got 0"),
    ({"batch": "1025"}, "--duplexact-batch must be >= 1 and at most 1024, got 1025"),
    ({"concurrency": "0"}, "--duplexact-concurrency must be >= 1"),
    ({"timeout": "0"}, "--duplexact-timeout must be > 0 and at most 86400 seconds, got 0.0"),
    ({"judge_timeout": "-1"}, "--duplexact-judge-timeout must be > 0"),
    ({"judge_timeout": "1e9"}, "--duplexact-judge-timeout must be > 0 and at most 86400"),
])
def test_a_bad_value_is_refused_while_reading(tmp_path, given, msg):
    with pytest.raises(pytest.UsageError, match=re.escape(msg)):
        RunConfig.from_pytest(_Config(tmp_path, **given))


@pytest.mark.parametrize("given,where,msg", [
    ({"baseline_alpha": "x"}, "baseline-alpha", "expected a number, got 'x'"),
    ({"max_cost": "x"}, "max-cost", "expected a number, got 'x'"),
])
def test_a_number_read_later_is_refused_where_it_is_needed(tmp_path, given, where, msg):
    """The budget's and the baseline's numbers are refused after an estimate-only run could
    end (which ignores them), still at configure."""
    run = RunConfig.from_pytest(_Config(tmp_path, **given))
    with pytest.raises(pytest.UsageError, match=re.escape(msg)):
        run.need(where)


class _Probe:
    """Sees this run's config and whether the session is registered during the run."""

    config = during = None

    def pytest_sessionstart(self, session):
        self.config = session.config
        self.during = session.config.pluginmanager.get_plugin("duplexact-session")


def test_the_session_leaves_the_plugin_manager_at_unconfigure(pytester):
    from pytest_duplexact.plugin import session_of

    seen = []
    for k in (1, 2):  # two in-process runs: the second starts with its own session
        probe = _Probe()
        pytester.inline_run("--duplexact-model=silent", "--collect-only",
                            f"--duplexact-run-dir=run{k}", "-p", "no:cacheprovider",
                            "-p", "no:randomly", "-p", "no:asyncio", "-p", "no:benchmark",
                            plugins=[probe])
        assert probe.during is not None and probe.during.run_dir.name == f"run{k}"
        assert probe.config.pluginmanager.get_plugin("duplexact-session") is None
        assert not probe.config.pluginmanager.is_registered(probe.during)
        assert session_of(probe.config) is None
        seen.append(probe.during)
    assert seen[0] is not seen[1]
