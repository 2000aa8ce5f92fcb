"""The run's configuration: every ``--duplexact-*`` option read once (options.py: command line
over ini over what a resumed run's run.json holds over the default) into one frozen, typed
``RunConfig`` at pytest_configure (plugin.py), the way pytest builds its ``LogXML`` from
option values read once. The session, the settings building (configure.py), the preflight
checks (preflight.py) and the estimate and budget (spend.py) read its fields, not the options.

What the harness needs beside the RunSettings comes out as ``run.harness.RunKnobs``
(``knobs()``): how the run executes, never in run.json, the report or the fingerprint.

A value refused at configure is refused while this object is built: one line and the usage
exit, before any test (the harness's numbers too, range-checked here: ``LIMITS``). Only the
budget's and the baseline gate's numbers keep their problem here and say it after
``--duplexact-estimate`` had its chance to end the run (an estimate ignores them), still at
configure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..data.taxonomy import TIMING_TOLERANCE_S
from ..remote.netsafety import masked_repr
from ..run.harness import RunKnobs
from ..run.selection import Selection, SelectionError, parse_shard
from . import options

# numbers whose problem is said where the value is first needed (see the module docstring)
_DEFERRED = ("max-cost", "baseline-alpha")
# the harness's numbers: the range each must fall in (a timeout's lower end excluded); the
# upper ends keep a typo (99999999999999999999) from reaching a thread pool or a clock
# --duplexact-progress (pytest_plugin/live_progress.py)
PROGRESS_MODES = ("auto", "bar", "lines", "off")
LIMITS = {"concurrency": (1, 1024), "batch": (1, 1024),
          "timeout": (0.0, 86_400.0), "judge-timeout": (0.0, 86_400.0)}


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@dataclass(frozen=True)
class RunConfig:
    """Every option's value, parsed; the defaults are options.py's."""

    model: str | None = None
    model_options: tuple[tuple[str, str], ...] = ()  # KEY=VALUE, last wins, URLs masked
    data: str | None = None
    data_mapping: str | None = None
    skip_unmappable: bool = False
    bargein_branches: str = "on"  # "on" | "off"
    channel: str | None = None  # canonical spec (pipelines/channel.py); None: clean
    selection: Selection = field(default_factory=Selection)  # action ... shard
    run_dir: str | None = None
    resume: str | None = None
    report: str | None = None
    gates: tuple = ()  # report.gates.Gate, in the order given
    baseline: str | None = None
    autosave: bool = False
    compare: str | None = None
    prices: str | None = None
    estimate: bool = False
    max_cost: float | None = None
    max_wall: str | None = None  # parsed by the budget, which an estimate-only run never builds
    storage: str | None = None
    baseline_alpha: float | None = 0.05
    baseline_ignore_borderline: bool = False
    judge: str | None = None
    judge_base_url: str | None = None
    audio_judge: str | None = None
    simulator: str | None = "rule"
    simulator_model: str | None = "gpt-5.4"
    transcriber: str | None = "auto"
    cache_dir: str | None = None
    audio_format: str = "flac"
    concurrency: int = 1
    batch: int | None = 1
    timeout: float | None = 60.0
    judge_timeout: float | None = 150.0
    timing_tolerance: float | None = TIMING_TOLERANCE_S  # s; None: off (lateness recorded)
    progress: str = "auto"  # auto | bar | lines | off (pytest_plugin/live_progress.py)
    # where pytest was invoked (default run directory, store); on an xdist worker, the run
    # directory the controller chose (session.pytest_configure_node)
    invocation_dir: Path = field(default_factory=Path.cwd)
    worker: bool = False
    assigned_run_dir: Path | None = None
    # option name -> UsageError message, for the numbers of _DEFERRED that cannot be read
    problems: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> "RunConfig":
        """Read every option once, refusing a bad value now (pytest.UsageError); call after
        resumed.load, which fills in what a resumed run's run.json holds."""
        get = lambda name: options.get(config, name)  # noqa: E731
        problems, later = [], {}
        for name in _DEFERRED:
            try:
                later[name] = get(name)
            except pytest.UsageError as e:
                later[name] = None
                problems.append((name, str(e)))
        try:
            selection = Selection(
                actions=tuple(get("action")), conditions=tuple(get("condition")),
                scenarios=tuple(get("scenario")), sources=tuple(get("source")),
                corpora=tuple(get("corpus")), limit=get("limit"), seed=get("seed"),
                shard=parse_shard(get("shard")))
        except SelectionError as e:
            raise pytest.UsageError(f"duplexact selection: {e}") from None
        gates = _gates(get("gate"))
        audio_format = _audio_format(get("audio-format"))
        branches = get("bargein-branches")
        if branches not in ("on", "off"):
            raise pytest.UsageError("--duplexact-bargein-branches: use 'on' or 'off'")
        knobs = {name: _in_range(name, get(name)) for name in LIMITS}
        channel = _channel(get("channel"))
        worker = is_worker(config)
        assigned = config.workerinput.get("duplexact_run_dir") if worker else None
        return cls(
            model=get("model"), model_options=_model_options(get("model-option")),
            data=get("data"), data_mapping=get("data-mapping"),
            skip_unmappable=get("skip-unmappable"), bargein_branches=branches,
            channel=channel,
            selection=selection, run_dir=get("run-dir"), resume=get("resume"),
            report=get("report"), gates=gates, baseline=get("baseline"),
            autosave=get("autosave"), compare=get("compare"), prices=get("prices"),
            estimate=get("estimate"), max_cost=later["max-cost"], max_wall=get("max-wall"),
            storage=get("storage"), baseline_alpha=later["baseline-alpha"],
            baseline_ignore_borderline=get("baseline-ignore-borderline"),
            judge=get("judge"), judge_base_url=get("judge-base-url"),
            audio_judge=get("audio-judge"), simulator=_simulator(get("simulator")),
            simulator_model=get("simulator-model"), transcriber=get("transcriber"),
            cache_dir=get("cache-dir"), audio_format=audio_format,
            concurrency=knobs["concurrency"], batch=knobs["batch"],
            timeout=knobs["timeout"], judge_timeout=knobs["judge-timeout"],
            timing_tolerance=_timing_tolerance(get("timing-tolerance")),
            progress=_progress(get("progress")),
            invocation_dir=Path(config.invocation_params.dir), worker=worker,
            assigned_run_dir=Path(assigned) if assigned else None,
            problems=tuple(problems))

    def need(self, *names: str) -> None:
        """Refuse (pytest.UsageError) the first of these options whose value could not be
        read."""
        said = dict(self.problems)
        for name in names:
            if name in said:
                raise pytest.UsageError(said[name])

    @property
    def store(self) -> Path:
        """The store folder of --duplexact-autosave / --duplexact-compare."""
        from ..report.store.saved import DEFAULT_STORE

        return Path(self.invocation_dir, self.storage or DEFAULT_STORE)

    @property
    def timing_tolerance_ms(self) -> float | None:
        """The timing tolerance as the outcomes' ``clock`` says it (ms); None: off. What a
        resumed or reported trial is judged against (journal.py, report/sections/timing.py)."""
        return None if self.timing_tolerance is None else round(self.timing_tolerance * 1000, 1)

    def knobs(self) -> RunKnobs:
        """The harness's knobs (their numbers were range-checked at configure)."""
        return RunKnobs(concurrency=self.concurrency, batch=self.batch, timeout=self.timeout,
                        judge_timeout=self.judge_timeout,
                        cache_dir=Path(self.cache_dir) if self.cache_dir else None,
                        audio_format=self.audio_format,
                        bargein_branches=self.bargein_branches != "off",
                        timing_tolerance=self.timing_tolerance)


def _in_range(name: str, value):
    """``value`` of --duplexact-<name> if within ``LIMITS[name]``, else the one-line refusal;
    an int's lower end is included, a float's (a timeout) excluded, NaN refused."""
    low, high = LIMITS[name]
    exclusive = isinstance(low, float)
    if (low < value if exclusive else low <= value) and value <= high:
        return value
    unit = " seconds" if exclusive else ""
    lower = f"> {low:g}" if exclusive else f">= {low}"
    raise pytest.UsageError(f"--duplexact-{name} must be {lower} and at most {high:g}{unit}, "
                            f"got {value!r}")


def _model_options(items) -> tuple[tuple[str, str], ...]:
    out = {}
    for item in items:
        if "=" not in item:
            raise pytest.UsageError(f"--duplexact-model-option expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        # a repeated key: the last value wins; a password in a URL never shows in a repr
        out[k.strip()] = masked_repr(v.strip())
    return tuple(out.items())


def _gates(exprs) -> tuple:
    from ..report.sections import gates

    try:
        return tuple(gates.parse(g) for g in exprs)
    except gates.GateError as e:
        raise pytest.UsageError(str(e)) from None


def _channel(value) -> str | None:
    """--duplexact-channel: the canonical spec, None for clean; one line for a bad spec."""
    from ..pipelines.channel import ChannelError, parse

    try:
        channel = parse(value)
    except ChannelError as e:
        raise pytest.UsageError(f"--duplexact-channel: {e}") from None
    return None if channel.clean else channel.spec


def _timing_tolerance(value) -> float | None:
    """--duplexact-timing-tolerance: milliseconds (> 0) or 'off'; seconds out."""
    if value is None or str(value).strip() == "":
        return TIMING_TOLERANCE_S
    text = str(value).strip().lower()
    if text == "off":
        return None
    try:
        ms = float(text.removesuffix("ms"))
    except ValueError:
        ms = float("nan")
    if not ms > 0 or ms == float("inf"):
        raise pytest.UsageError(f"--duplexact-timing-tolerance={value!r}: give milliseconds "
                                "(> 0), e.g. 100, or 'off'")
    return ms / 1000


def _progress(value) -> str:
    mode = str(value or "auto").strip().lower()
    if mode not in PROGRESS_MODES:
        raise pytest.UsageError(f"--duplexact-progress={value!r}: use "
                                f"{', '.join(PROGRESS_MODES)}")
    return mode


def _simulator(value) -> str:
    """Checked here, with the other options: the policy is built with the harness, inside
    the first instance, where a typo was an error per instance with a traceback each."""
    from ..data.suggest import did_you_mean

    name = str(value or "rule").strip().lower()
    if name not in ("rule", "llm"):
        raise pytest.UsageError(f"--duplexact-simulator={value!r}: use 'rule' or 'llm'"
                                f"{did_you_mean(name, ('rule', 'llm'))}")
    return name


def _audio_format(value) -> str:
    from ..data.recording_io import AUDIO_FORMATS

    fmt = str(value or "flac").strip().lower()
    if fmt not in AUDIO_FORMATS:
        raise pytest.UsageError(f"--duplexact-audio-format={fmt!r}: use flac or wav")
    return fmt
