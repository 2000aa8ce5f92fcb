"""Every ``--duplexact-*`` option, each with its ini / ``[tool.pytest.ini_options]`` key.

A command-line value wins over the ini value, which wins over the default. Under
``--duplexact-resume`` the resumed run's own settings (its run.json, ``resumed.py``) come
between the ini value and the default, so the printed resume command works as printed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Opt:
    name: str  # --duplexact-<name>, ini duplexact_<name with _>
    help: str
    default: object = None
    kind: str = "string"  # string | int | float | list (repeatable / comma or newline list)
    #                       | flag (no value) | optional (a value may follow; alone: const)
    metavar: str | None = None
    const: object = None

    @property
    def flag(self) -> str:
        return f"--duplexact-{self.name}"

    @property
    def ini(self) -> str:
        return "duplexact_" + self.name.replace("-", "_")

    @property
    def dest(self) -> str:
        return self.ini


OPTIONS: tuple[Opt, ...] = (
    Opt("model", "Model to evaluate: a built-in (`duplexact models` lists them with what each "
        "needs), recorded:DIR, an import path 'package.module:factory', or a name registered "
        "in the 'pytest_duplexact.models' entry-point group. Setting it runs the DuplexAct "
        "suites.",
        metavar="NAME"),
    Opt("model-option", "Option passed to the model factory as KEY=VALUE (repeatable).",
        kind="list", metavar="KEY=VALUE"),
    Opt("data", "Dataset folder in the DuplexAct format (docs/dataset-format.md), or the released "
        "benchmark: hf:LincolnD/DuplexAct[@REV] (downloaded through huggingface_hub) or "
        "hf:/path/to/a/parquet/snapshot (docs/released-data.md); default: the bundled fixture set.",
        metavar="DIR|hf:REPO"),
    Opt("data-mapping", "TOML file completing or correcting the released data's mapping "
        "(docs/released-data.md); merged over the bundled one.", metavar="FILE.toml"),
    Opt("skip-unmappable", "Released data: run without the instances the mapping cannot place "
        "(they are counted and listed in the report) instead of refusing to start.",
        kind="flag"),
    Opt("bargein-branches", "interrupt: after a detected takeover play the instance's "
        "branch_acknowledged clip (the user yields), else continue the user speech; 'off' "
        "keeps the plain barge-in replay (docs/dataset-format.md).", default="on",
        metavar="on|off"),
    Opt("channel", "What the model hears the user through: 'clean' (default), or stages "
        "joined by '+': noise:KIND@SNR (white, pink, babble, cafe), phone, room:RT60, "
        "echo:LEVEL_DB@DELAY_MS (its own output fed back), e.g. phone+noise:babble@10 "
        "(docs/channels.md).", metavar="SPEC"),
    Opt("action", "Run only these actions (comma-separated).", kind="list", metavar="A,B"),
    Opt("condition", "Run only these conditions: 'delayed' or 'take_turn.delayed' "
        "(comma-separated).", kind="list", metavar="C,D"),
    Opt("scenario", "Run only these scenarios (casual, meeting, customer_service, interview).",
        kind="list", metavar="S"),
    Opt("source", "Run only instances from this source (real, synthesized).", kind="list",
        metavar="S"),
    Opt("corpus", "Run only instances from these corpora (AMI, CORAAL, Loqui, synthesized, "
        "Candor).", kind="list", metavar="C"),
    Opt("limit", "At most N instances per condition, sampled with --duplexact-seed.",
        kind="int", metavar="N"),
    Opt("seed", "Seed for per-condition sampling and for seeded models.", default=0,
        kind="int", metavar="N"),
    Opt("shard", "Run only shard K of N (1-based, deterministic by instance id); 'auto' "
        "(or 'auto/N') reads K/N from a Slurm job array, a Kubernetes Indexed Job or "
        "DUPLEXACT_SHARD_INDEX/_COUNT (docs/sharding.md).",
        metavar="K/N"),
    Opt("run-dir", "Folder for recordings, timelines, outcomes and the report; default "
        "duplexact-runs/<model>-<time> under the invocation directory.", metavar="DIR"),
    Opt("resume", "Resume the run in this folder: instances already finished with the same "
        "model, data and scoring settings are not run again.", metavar="RUN_DIR"),
    Opt("report", "Also write the JSON report here (it is always written to the run dir).",
        metavar="PATH.json"),
    Opt("gate", "CI gate, e.g. 'wait.I>=0.9', 'take_turn.delayed.I>=60%', 'stop.T<=2.0' "
        "(repeatable). With gates set, they decide the exit status.", kind="list",
        metavar="EXPR"),
    Opt("baseline", "Regression gate: compare with this stored report.json per action and "
        "condition; a statistically significant drop in I or S fails the run (docs/reports.md).",
        metavar="REPORT.json"),
    Opt("autosave", "Keep this run's report in the store folder (--duplexact-storage), "
        "numbered, for later --duplexact-compare; a store that cannot be written is refused "
        "before the run.", kind="flag"),
    Opt("compare", "Compare with a stored run (latest: this model's latest; or its number) "
        "with the baseline gate's significance test: a significant drop fails the run.",
        kind="optional",
        const="latest", metavar="ID|latest"),
    Opt("prices", "TOML price table for the report's estimated cost; its entries replace the "
        "bundled ones by model name (pytest_duplexact/spend/prices.toml shows the layout).",
        metavar="FILE"),
    Opt("estimate", "Print the run's estimate (instances, audio to stream, ideal wall time, "
        "expected cost where prices are known) and exit without calling the model "
        "(docs/runs.md).", kind="flag"),
    Opt("max-cost", "Budget in the price table's currency: once the spend measured so far plus "
        "the trials in flight reaches it, no new trial starts; the run ends incomplete and "
        "resumable (docs/runs.md). Refused for a model or judge without a price.",
        kind="float", metavar="USD"),
    Opt("max-wall", "Wall-time budget (90s, 45m, 2h, 1h30m): once reached, no new trial "
        "starts; trials in flight finish (docs/runs.md).", metavar="DURATION"),
    Opt("storage", "Store folder of --duplexact-autosave / --duplexact-compare; default "
        ".duplexact under the invocation directory.", metavar="DIR"),
    Opt("baseline-alpha", "Significance level of the baseline gate (family-wise, "
        "Holm-adjusted one-sided tests).", default=0.05, kind="float", metavar="ALPHA"),
    Opt("baseline-ignore-borderline", "The baseline gate (--duplexact-baseline, "
        "--duplexact-compare) sets aside flips whose immediate verdict was borderline in "
        "either run (an edge error or one word at the 3-word line would flip it; "
        "docs/reports.md), so they alone never fail it.", kind="flag"),
    Opt("judge", "Text judge model for subsequent follow-through (e.g. gpt-5.4); default: "
        "none, S is reported as not judged.", metavar="MODEL"),
    Opt("judge-base-url", "OpenAI-compatible base URL for the judges (vLLM, a local server).",
        metavar="URL"),
    Opt("audio-judge", "Audio judge model for the backchannel function (e.g. gpt-audio-1.5).",
        metavar="MODEL"),
    Opt("simulator", "Cue-timing policy for Simulator Replay: 'rule' (offline default) or "
        "'llm' (the paper's LLM simulator; uses --duplexact-simulator-model).", default="rule",
        metavar="rule|llm"),
    Opt("simulator-model", "LLM for the simulator policy.", default="gpt-5.4", metavar="MODEL"),
    Opt("transcriber", "Transcripts of model speech: 'auto' (the model's native transcript, "
        "else 'offline'), 'native', 'offline' (= 'tiny.en': faster-whisper, Whisper tiny.en, "
        "bundled), 'base' (Whisper base, the asr-base extra), 'whisper-1' (the paper's, "
        "remote), openai:MODEL, or package.module:factory (docs/timeline.md).",
        default="auto", metavar="NAME"),
    Opt("cache-dir", "Shared cache for judge / simulator / transcription calls; default "
        "<run dir>/cache.", metavar="DIR"),
    Opt("audio-format", "Recordings in the run directory as 'flac' (lossless, about 1/8 of "
        "the size) or 'wav' (PCM-16); recorded:DIR reads both.", default="flac",
        metavar="flac|wav"),
    Opt("concurrency", "Instances in flight at once inside one worker (streaming models; "
        "default 1: one at a time).",
        default=1, kind="int", metavar="N"),
    Opt("batch", "Stepped trials run in lockstep inside one worker, sharing each model call "
        "(a model offering step_batch: the built-ins, moshi); default 1: one at a time "
        "(docs/runs.md, how to pick B).",
        default=1, kind="int", metavar="B"),
    Opt("timeout", "Seconds the model may go without answering (a stepped frame, a streaming "
        "chunk sent or event received) before its instance is an error naming the call it is "
        "stuck in.", default=60.0, kind="float", metavar="SECONDS"),
    Opt("judge-timeout", "Seconds one judge, simulator or transcription question may take in "
        "total, retries included; each HTTP attempt gets at most 60 s of it.", default=150.0,
        kind="float", metavar="SECONDS"),
    Opt("timing-tolerance", "Streaming models: the most the harness itself may run late on a "
        "trial (an input chunk, an output stamp, an event-loop stall) before the trial is "
        "re-run at a lower concurrency, then reported as 'timing unreliable' (an error, in no "
        "rate); 'off' only records the lateness. Default 100: a fifth of the tightest window "
        "the rules use (docs/realtime.md).", metavar="MS|off"),
    Opt("progress", "How a running run shows its progress: 'bar' (one line redrawn in place: "
        "instances done, errors, pass rate by action, spend, elapsed, time left), 'lines' (a "
        "plain line every tenth of the run or minute, for logs), 'off'; 'auto': bar on a "
        "terminal, lines otherwise, off where CI is set (docs/runs.md).", default="auto",
        metavar="auto|bar|lines|off"),
)

BY_NAME = {o.name: o for o in OPTIONS}
# option name -> the value the resumed run was started with (resumed.py fills it)
RESUMED = pytest.StashKey[dict]()


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("duplexact", "DuplexAct full-duplex conformance suite")
    for o in OPTIONS:
        # argparse %-formats help strings; the ini key is named so users find both spellings
        cli_help = f"{o.help} [ini: {o.ini}]".replace("%", "%%")
        if o.kind == "list":
            group.addoption(o.flag, action="append", dest=o.dest, default=None, help=cli_help,
                            metavar=o.metavar)
            parser.addini(o.ini, o.help, type="linelist", default=[])
        elif o.kind == "flag":
            group.addoption(o.flag, action="store_true", dest=o.dest, default=None,
                            help=cli_help)
            parser.addini(o.ini, o.help, type="bool", default=False)
        elif o.kind == "optional":
            group.addoption(o.flag, action="store", nargs="?", const=o.const, dest=o.dest,
                            default=None, help=cli_help, metavar=o.metavar)
            parser.addini(o.ini, o.help, default=None)
        else:
            group.addoption(o.flag, action="store", dest=o.dest, default=None, help=cli_help,
                            metavar=o.metavar)
            parser.addini(o.ini, o.help, default=None)


def _split(values) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(p.strip() for p in str(v).replace("\n", ",").split(","))
    return [p for p in out if p]


def given(config: pytest.Config, name: str) -> bool:
    """Whether the user set this option (command line or ini), not just its default."""
    o = BY_NAME[name]
    return config.getoption(o.dest) is not None or config.getini(o.ini) not in (None, "", [],
                                                                              False)


# options whose empty command-line value would silently drop a gate: refused (_not_empty)
NOT_EMPTY = ("gate", "baseline", "compare")


def _not_empty(o: Opt, cli) -> None:
    """``--duplexact-gate=`` (an unset CI variable, say) would run ungated and exit 0: one
    line and the usage exit instead. An empty ini value stays "unset": an ini file expands
    no variables, so an empty key there is written on purpose, not a variable that is
    missing."""
    values = cli if isinstance(cli, list) else [cli]
    if any(v is not None and not str(v).strip() for v in values):
        raise pytest.UsageError(f"{o.flag}= is empty (an unset variable?); give it a value "
                                "or drop the option")


def get(config: pytest.Config, name: str):
    o = BY_NAME[name]
    if name in NOT_EMPTY:
        _not_empty(o, config.getoption(o.dest))
    resumed = config.stash.get(RESUMED, {})
    if name in resumed and not given(config, name):
        return resumed[name]
    cli = config.getoption(o.dest)
    if o.kind == "list":
        if name == "gate":  # a gate expression never contains a comma; keep one per entry
            vals = list(cli) if cli else list(config.getini(o.ini) or [])
            return [v.strip() for v in vals if v.strip()]
        return _split(cli) if cli else _split(config.getini(o.ini))
    if o.kind == "flag":
        return bool(cli) or bool(config.getini(o.ini))
    raw = cli if cli is not None else config.getini(o.ini)
    if raw in (None, ""):
        return o.default
    if o.kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise pytest.UsageError(f"{o.flag} / {o.ini}: expected an integer, got {raw!r}")
    if o.kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise pytest.UsageError(f"{o.flag} / {o.ini}: expected a number, got {raw!r}")
    return raw
