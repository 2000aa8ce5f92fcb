"""The run as one object: ``DuplexactSession`` is built from the run's RunConfig (config.py:
every option read once), is registered as a plugin on each pytest process (the way pytest's
junitxml registers ``LogXML``, and unregistered at unconfigure the same way: plugin.py) and
does its work in hook methods: parametrizing the suites, running each instance for the
fixture, collecting outcomes on the controller, and at the end the report, the gates and the
exit status. What the run is (dataset, settings, run directory, resume) is built by
configure.py, the checks before it starts are preflight.py's, the estimate and budget
spend.py's. plugin.py, the pytest11 entry module, only declares the options and fixtures and
registers this object.

Outcomes travel on each TestReport's ``user_properties`` (so pytest-xdist carries them from
workers for free); only the controller aggregates. Under xdist the controller and every
worker have their own session object; the workers learn the run directory from the
controller through ``workerinput`` (xdist's public ``pytest_configure_node``)."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import sys
import time
import traceback
from pathlib import Path

import pytest

from ..data import usage
from ..data.atomic import FILE_MODE
from ..data.results import InstanceOutcome, Verdict
from ..models.adapter import Traits, traits
from ..models.contract import ModelError
from ..pipelines import interrupt
from ..run import journal
from ..run.admission import concurrency_measured
from ..run.harness import Harness
from ..run.rundir import ERROR_FILE, RunDir, write_json
from ..run.selection import SelectionError, nothing_matches, select
from ..run.settings import RunSettings, SettingsError
from ..spend.budget import STOP_FILE
from . import configure, model_errors, preflight
from .config import RunConfig
from .session_state import ControllerState, WorkerState

# instances in a row that could not connect to the model's server at all (each after its own
# retries): the server is gone, and the run stops instead of failing every instance left
LOST_AFTER = 3
PROPERTY = "duplexact"  # user_properties key of an instance's outcome
USAGE_PROPERTY = "duplexact_usage"  # ... and of what it cost in remote calls
CONCURRENCY_PROPERTY = "duplexact_concurrency"  # ... and its admission (prefetch.measure)
_UNSELECTED = pytest.mark.duplexact_unselected


def _once_fixed(e: OSError, path: Path) -> str:
    """When the resume hint after a failed report write will work: room only for a full
    disk (a missing folder or a bad path is not a disk without room)."""
    if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return "once there is room"
    if e.errno == errno.EISDIR:
        return f"once {path} is not a folder"
    if e.errno == errno.ENOENT:
        return f"once {path.parent} exists"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"once {path.parent} may be written"
    return f"once {path} can be written"


class ModelBuildError(Exception):
    """The model's factory failed: no instance can run (one error, then the run stops)."""


class JudgeUnavailable(Exception):
    """A judge was asked and gave no usable verdict: the measurement is incomplete (an error,
    never a NO and never a YES)."""


def _never_rerun_misses(config, items) -> None:
    """pytest-rerunfailures re-runs a failed test and keeps the last outcome: for a miss that
    is retry-until-pass, which inflates rates. Each instance gets a ``flaky`` marker that
    keeps the user's --reruns / --reruns-delay but excepts misses (``DuplexactMiss``), so
    only errors (a dropped connection, a crashed model) are re-run."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    from .suite import DuplexactMiss

    reruns = config.getoption("reruns", None)
    if reruns is None:
        try:
            reruns = int(config.getini("reruns") or 0)
        except (ValueError, TypeError):
            reruns = 0
    delay = config.getoption("reruns_delay", None) or 0
    if config.getoption("reruns_mode", None) == "append":  # the plugin adds the global count
        reruns = 0
    for item in items:
        if "duplexact_instance" in getattr(item, "fixturenames", ()) and \
                item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=delay,
                                              rerun_except=[DuplexactMiss]))


def param_id(inst) -> str:
    """``delayed-casual-03`` for instance ``take_turn-delayed-casual-03``: the condition leads
    (so ``-k delayed`` selects it) and the instance id follows without repeating it."""
    prefix = f"{inst.action}-{inst.condition}-"
    rest = inst.id[len(prefix):] if inst.id.startswith(prefix) else inst.id
    return f"{inst.condition}-{rest}"


class DuplexactSession:
    """What the plugin knows for this pytest process (controller or worker), and its hooks."""

    def __init__(self, config: pytest.Config, run: RunConfig):
        self.config = config
        self.run_config = run
        self.worker = run.worker
        dataset, released = configure.load_dataset(config, run)
        try:
            self.instances = select(dataset.instances, run.selection)
        except SelectionError as e:
            raise pytest.UsageError(f"duplexact selection: {e}") from None
        if not self.instances:  # said before a run folder exists (it held empty tables)
            empty = nothing_matches(dataset.instances, run.selection)
            if empty:
                raise pytest.UsageError(f"duplexact selection: {empty}")
        self.settings: RunSettings = configure.settings_of(run, dataset, released=released)
        # --collect-only measures nothing: no run folder, no report, no resume line
        self.measuring = not config.option.collectonly
        self.run_dir = configure.resolve_run_dir(run, claim=self.measuring)
        self.controller = ControllerState()
        self.runner = WorkerState()
        if released is not None and released["unmappable"]:
            self.controller.notes.append(
                f"{released['unmappable']} row(s) of the released data skipped "
                "as unmappable (--duplexact-skip-unmappable): "
                + ", ".join(released["unmappable_ids"]))
        self.resumed: dict[str, dict] = {}  # instance id -> stored outcome dict
        # the run model's traits, read once: asked per test and per look-ahead (up to
        # 2 x concurrency instances per test), traits() costs ~0.15 ms of protocol checks in
        # the pytest thread, which shares the GIL with the streaming loop
        self._traits: tuple[object, Traits] | None = None
        self._positions: dict[str, int] | None = None  # nodeid -> index in session.items
        self.rescore: set[str] = set()  # ids scored again from a kept recording (resume)
        if run.resume:
            wanted = {i.id for i in self.instances}
            if self.worker:  # the controller checked run.json (and rewrote it)
                found = journal.scan(self.run_dir, wanted, self.settings.fingerprint(),
                                     run.timing_tolerance_ms)
                self.resumed, self.rescore = found.finished, found.rescore
            else:
                self.resumed, self.controller.messages, self.rescore = configure.load_resumed(
                    self.run_dir, self.settings, wanted, run.timing_tolerance_ms)
        self._stop_file = self.run_dir / STOP_FILE  # how the controller stops workers
        self._pytest_session: pytest.Session | None = None
        self.controller.started = time.monotonic()
        if not self.worker:
            try:
                self._plan(config)  # --duplexact-estimate ends the run here
                self.controller.baseline = preflight.check(run, self.settings, self.instances)
                self.settings = preflight.check_server(run, self.settings)
                if self.measuring:
                    self.runner.model = self._build_model(config)
                    preflight.check_channel(self.settings, self.runner.model)
            except BaseException:  # the run never starts: no empty default run dir left behind
                if not (run.resume or run.run_dir) and self.measuring:
                    configure.remove_if_empty(self.run_dir)
                raise
            if self.measuring:
                self.controller.lock = configure.open_run_dir(self.run_dir, self.settings,
                                                              configure.run_dir_flag(run))
            # A resumed folder keeps its earlier report until this session's replaces it (on
            # Ctrl-C too, not on SIGKILL): never a moment with no report at all.

    def _plan(self, config) -> None:
        """The estimate and the budget (spend.py); with --duplexact-estimate the run ends
        there, before anything is created."""
        ctl = self.controller
        from .spend import plan_run

        ctl.estimate, lines, ctl.budget = plan_run(config, self.run_config, self.settings,
                                                   self.instances, len(self.resumed))
        ctl.notices += lines
        try:  # a stop left by an earlier, budgeted invocation of this run
            self._stop_file.unlink()
        except OSError:  # none; or a run directory we cannot write, refused just below
            pass

    def _build_model(self, config):
        """The model, built before the run folder is opened (serial runs with something left
        to run), so a factory that raises refuses the run in one line, exit 4, with no run
        folder and no resume hint for a run that never started. Kept for the harness (built
        once). xdist workers build their own (the controller would load the weights twice)
        and report a failure as one error in the report."""
        from ..models import resolve_model

        distributed = getattr(config.option, "numprocesses", None) and \
            getattr(config.option, "dist", "no") != "no"  # -n 1 too: its worker builds
        if distributed or all(i.id in self.resumed for i in self.instances):
            return None
        try:
            return resolve_model(self.settings.model, **self.settings.options)
        except Exception as e:  # the factory, its option checks or its weights
            if self.run_config.run_dir and not _users_input(e):
                # the folder the user named is the run's record (CI keeps it): the failure
                # is reported there as one error (session.harness)
                self.runner.build_exc = e
                return None
            fix = ("fix its options (--duplexact-model-option) or its factory"
                   if _users_input(e) else "fix the factory or what it loads")
            raise pytest.UsageError(
                f"--duplexact-model={self.run_config.model}: the model could not be built: "
                f"{type(e).__name__}: {' '.join(str(e).split())}; {fix}; nothing was "
                "run") from None

    # --- the harness and one instance -------------------------------------------------------

    @property
    def harness(self) -> Harness:
        """Built on first use (in the first test's setup), so a usage error in the model's
        wiring is reported by pytest, and collection-only runs build nothing; with the model
        _build_model built (serial runs), else the model built here (xdist workers)."""
        runner = self.runner
        if runner.harness is None:
            knobs = self.run_config.knobs()  # checked at configure (config.LIMITS)
            if runner.build_error is not None:  # the session fixture's try, already failed
                raise ModelBuildError(runner.build_error) from runner.build_cause
            try:
                if runner.build_exc is not None:  # _build_model's failure, kept for this run
                    raise runner.build_exc
                runner.harness = Harness.from_settings(self.settings, self.run_dir, knobs,
                                                       model=runner.model)
            except SettingsError as e:
                raise pytest.UsageError(str(e)) from None
            except Exception as e:  # the model's factory (or its weights) failed
                runner.build_error = (f"--duplexact-model={self.run_config.model}: the model "
                                      f"could not be built: {type(e).__name__}: {e}; every "
                                      "instance would fail the same way, so the run stops "
                                      "here")
                runner.build_cause = e
                raise ModelBuildError(runner.build_error) from e
            self._say_batching()
        return runner.harness

    def _say_batching(self) -> None:
        """How --duplexact-batch runs (slots or waves), once the model is known: on the
        terminal as the first trial starts and again in the summary (serial runs)."""
        batcher = getattr(self.runner.harness.prefetcher, "batcher", None)
        if batcher is None:
            return
        line = f"duplexact: batched stepping, {batcher.mode}"
        self.controller.messages.append(line)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and not self.worker:
            tr.ensure_newline()
            tr.write_line(line)

    def outcome(self, item, inst) -> InstanceOutcome:
        """The instance's outcome (stored when resumed, else run now), recorded on the test's
        report; raises on a model/harness error and on a judge that gave no answer."""
        done = self.resumed.get(inst.id)
        if done is not None:
            outcome = InstanceOutcome.from_dict(done)
            if done.get("usage") is not None:  # what it cost when it ran (journal.USAGE_KEY)
                item.user_properties.append((USAGE_PROPERTY, done["usage"]))
        else:
            try:
                harness = self.harness
            except ModelBuildError as exc:
                # one error, counted in the report, its factory's traceback in the instance's
                # error.txt (the terminal shows the short form: pytest_runtest_makereport);
                # pytest stops after this test instead of repeating it once per instance
                out = InstanceOutcome(inst.id, inst.action, inst.condition, inst.scenario,
                                      inst.source, error=str(exc), corpus=inst.corpus)
                with contextlib.suppress(OSError):
                    RunDir(self.run_dir).write_error(
                        inst.id, "".join(traceback.format_exception(exc)))
                item.user_properties.append((PROPERTY, out.to_dict()))
                item.session.shouldstop = "duplexact: the model could not be built"
                raise
            unsupported = self._unsupported(harness.model, inst)
            if unsupported:  # never a miss: the model cannot take part in this pipeline
                outcome = harness.unsupported_outcome(inst, unsupported)
                item.user_properties.append((PROPERTY, outcome.to_dict()))
                return outcome
            if harness.prefetcher is not None:  # keep `concurrency` trials in flight
                harness.prefetcher.submit([inst])
                harness.prefetcher.submit(
                    self._upcoming(item, 2 * harness.prefetcher.concurrency),
                    admit=self._may_start)
            before = usage.snapshot(harness)
            try:
                if inst.id in self.rescore:  # its kept recording, not the model again
                    self.rescore.discard(inst.id)
                    outcome = harness.rescore(inst)
                else:
                    outcome = harness.run(inst)
            except Exception as exc:
                outcome = harness.error_outcome(inst, exc)
                item.user_properties.append((PROPERTY, outcome.to_dict()))
                self._server_lost(item, exc)
                raise
            finally:
                item.user_properties.append(
                    (USAGE_PROPERTY, usage.delta(usage.snapshot(harness), before)))
                measure = getattr(harness.prefetcher, "measure", None)
                if measure is not None and (admitted := measure(inst.id)) is not None:
                    item.user_properties.append((CONCURRENCY_PROPERTY, admitted))
        item.user_properties.append((PROPERTY, outcome.to_dict()))
        stages = [outcome.immediate, outcome.subsequent]
        bad = [s for s in stages if s is not None and s.verdict is Verdict.JUDGE_ERROR]
        if bad:
            exc = JudgeUnavailable(bad[0].reason)
            if done is None:  # asked now: a judge that is gone counts toward stopping the run
                self._judge_lost(item, exc)
            raise exc
        self.runner.unreached = 0
        return outcome

    def _judge_lost(self, item, exc: JudgeUnavailable) -> None:
        """A judge's failure is a verdict, not an exception chain _unreachable could read:
        when the panel says this instance's request could not connect, it counts as a remote
        service gone (a user would otherwise pay for every model trial and have no judged
        stage come back), and its line names the judge and its address."""
        from ..remote.netsafety import mask_credentials

        panel = getattr(self.harness, "panel", None)
        judge = panel.unreachable() if panel is not None else None
        said = None
        if judge is not None:  # the address goes into the error's own line (shown short)
            where = mask_credentials(judge.endpoint_url)
            reason = str(exc)
            for prefix in (f"judge {judge.model}: ", f"audio judge {judge.model}: "):
                reason = reason.removeprefix(prefix)  # the model is named once, with where
            kind = "audio judge" if judge is panel.audio else "judge"
            said = f"{kind} {judge.model} at {where}: {reason}"
            exc.args = (said,)
        self._server_lost(item, exc, said, what="service" if judge is not None else None)

    def _server_lost(self, item, exc: BaseException, said: str | None = None,
                     what: str | None = None) -> None:
        """After LOST_AFTER instances in a row that could not connect at all, stop pytest
        before the next test: what was scored is kept, and the line says how to go on.
        ``what``: what could not be reached, where the caller knows it; else read off the
        error's chain (_unreachable)."""
        runner = self.runner
        what = what or _unreachable(exc)
        if what is None:
            runner.unreached = 0
            return
        runner.unreached += 1
        if runner.unreached < LOST_AFTER:
            return
        from ..remote.netsafety import mask_credentials

        if what == "service":  # a transcriber's or judge's: every instance would wait it out
            said = " ".join((said or str(exc)).split())[:300]
            item.session.shouldstop = (
                f"duplexact: a remote service cannot be reached ({LOST_AFTER} instances in a "
                f"row could not connect: {said}): check its URL and the network, then "
                f"{self.resume_command()}")
            return
        options = self.settings.options
        url = options.get("url") or options.get("server_url")
        where = f" at {mask_credentials(url)}" if url else ""
        item.session.shouldstop = (
            f"duplexact: the model's server{where} is gone ({LOST_AFTER} instances in a row "
            f"could not connect): restart it, then {self.resume_command()}")

    def resume_command(self) -> str:
        """The command that finishes this run. The model, data, selection and scoring come
        back from its run.json (resumed.py); how it ran (xdist workers, concurrency, batch)
        changes no verdict and is not in run.json, so it is said here: a run at 4 in flight
        resumed at 1 would take four times as long. Nor are the gates and the baseline in
        run.json, yet they decide the exit status: a resume without them would pass a run
        they fail, so they are said here too (``_gate_words``). Each word shell-quoted."""
        from .spend import workers

        words = [f"--duplexact-resume={self.run_dir}"]
        if workers(self.config) > 1:
            words += ["-n", str(workers(self.config))]
        if (self.run_config.concurrency or 1) > 1:
            words.append(f"--duplexact-concurrency={self.run_config.concurrency}")
        if (self.run_config.batch or 1) > 1:
            words.append(f"--duplexact-batch={self.run_config.batch}")
        words += self._gate_words()
        return " ".join(["pytest", *(shlex.quote(w) for w in words)])

    def _gate_words(self) -> list[str]:
        """The options that decide this run's exit status (its gates, its baseline and the
        baseline test's settings, its store), as given to it (command line or ini). A
        ``--duplexact-compare`` the controller resolved to a stored run names that run's
        number: ``latest`` would be this run's own incomplete report once it autosaved."""
        from . import options

        run = self.run_config
        words = [f"--duplexact-gate={g}" for g in options.get(self.config, "gate")]
        if run.baseline:
            words.append(f"--duplexact-baseline={run.baseline}")
        if run.compare:
            words.append(f"--duplexact-compare={self._compared() or run.compare}")
        if run.autosave:
            words.append("--duplexact-autosave")
        if run.storage and (run.autosave or run.compare):
            words.append(f"--duplexact-storage={run.storage}")
        alpha = run.baseline_alpha
        if alpha is not None and alpha != options.BY_NAME["baseline-alpha"].default:
            words.append(f"--duplexact-baseline-alpha={alpha!r}")
        if run.baseline_ignore_borderline:
            words.append("--duplexact-baseline-ignore-borderline")
        return words

    def _compared(self) -> str | None:
        """The number of the stored run --duplexact-compare resolved to (None: unknown)."""
        from ..report.store.saved import entries

        chosen = self.controller.baseline
        if not chosen:
            return None
        try:
            for number, path in entries(self.run_config.store):
                if Path(path).resolve() == Path(chosen).resolve():
                    return str(number)
        except OSError:
            pass
        return None

    def _upcoming(self, item, n: int) -> list:
        """The next n instances this process will run (not yet finished), in order. Serial:
        the session's items after this one. An xdist worker only learns what it runs next
        through pytest's public ``nextitem`` (its queue is xdist's private state), so it
        looks one test ahead."""
        runner = self.runner
        if self.worker:
            following = [runner.next_item] if runner.next_item is not None else []
        else:
            items = item.session.items
            k = (self._positions or {}).get(item.nodeid)
            if k is None or k >= len(items) or items[k] is not item:  # built once, or anew
                self._positions = {it.nodeid: k for k, it in enumerate(items)}  # if changed
                k = self._positions.get(item.nodeid)
                if k is None or items[k] is not item:
                    return []
            following = items[k + 1:]
        out = []
        for it in following:
            inst = getattr(getattr(it, "callspec", None), "params", {}).get("duplexact_instance")
            if inst is not None and inst.id not in self.resumed and \
                    inst.id not in self.rescore and \
                    not self._unsupported(runner.harness.model, inst):  # those never run
                out.append(inst)
                if len(out) >= n:
                    break
        return out

    # --- hooks ------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """pytest-xdist, controller: every worker writes into this run's directory."""
        node.workerinput["duplexact_run_dir"] = str(self.run_dir)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        action = getattr(metafunc.function, "_duplexact_action", None)
        if action is None:
            return
        insts = [i for i in self.instances if i.action == action]
        if not insts:  # this action is not selected: deselect it rather than show a skip
            metafunc.parametrize("duplexact_instance", [pytest.param(None, marks=_UNSELECTED)],
                                 ids=["unselected"])
            return
        metafunc.parametrize("duplexact_instance", insts, ids=[param_id(i) for i in insts])

    def pytest_collection_modifyitems(self, config, items) -> None:
        # an action outside the selection collects one placeholder test; it is deselected the
        # way -k deselects, so "collected", "deselected" and the outcomes add up
        unselected = [it for it in items if it.get_closest_marker("duplexact_unselected")]
        if unselected:
            items[:] = [it for it in items if not it.get_closest_marker("duplexact_unselected")]
            config.hook.pytest_deselected(items=unselected)
        _never_rerun_misses(config, items)

    def pytest_collection_finish(self, session) -> None:
        """What pytest will run (after -k / -m / --deselect): the report's 'no outcome'
        count is about these, not the whole selection."""
        self.controller.expected = {
            it.callspec.params["duplexact_instance"].id for it in session.items
            if getattr(getattr(it, "callspec", None), "params", {}).get(
                "duplexact_instance") is not None}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        """pytest-xdist, controller: it collects nothing itself; its workers say what they
        run (node ids ``test_<action>.py::test_<action>[<param id>]``)."""
        by_test = self.by_test()
        ctl = self.controller
        ctl.expected = (ctl.expected or set()) | {by_test[n.rpartition("::")[2]].id
                                                  for n in ids
                                                  if n.rpartition("::")[2] in by_test}

    def _unsupported(self, model, inst) -> str | None:
        """Why ``model`` cannot run ``inst``'s pipeline (models.adapter.Traits: the pipelines
        it declares, e.g. mini-omni2's ("direct",), or its own ``unsupported(pipeline)``).
        The traits are read once; ``unsupported`` is still asked every time (a deployment's
        answer can change once it has connected)."""
        if self._traits is None or self._traits[0] is not model:
            self._traits = (model, traits(model))
        return self._traits[1].why_unsupported(inst.pipeline.value)

    def by_test(self) -> dict:
        """Test name (``test_<action>[<param id>]``) -> its instance."""
        return {f"test_{i.action}[{param_id(i)}]": i for i in self.instances}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem) -> None:
        self.runner.next_item = nextitem  # for the look-ahead of the prefetcher; pytest runs on

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        """A model error's report, short (model_errors.py), and a scoring worker's death's
        an undecodable clip's, or a judge's or remote transcriber's that gave no answer (its
        message says what happened; a traceback through the harness says nothing more): the
        outcome stays an error. Built here instead of pytest's report (this hook
        returns the first answer), not after it: pytest's long form parses the source file
        of every frame (``ast.parse`` holds the GIL for tens of milliseconds each), in the
        pytest thread while other trials stream on the loop thread, and was thrown away."""
        from ..data.audio import AudioFormatError
        from ..run.offload import ScoringWorkerError

        exc = call.excinfo.value if call.excinfo is not None else None
        # AudioFormatError: a clip that does not decode; its message names the file and
        # what is wrong with it, and the frames above it are the pipeline's, never the cause
        short = (ModelError, ScoringWorkerError, ModelBuildError, AudioFormatError,
                 JudgeUnavailable)
        # a remote transcriber's failure: only where that module was imported (it loads the
        # OpenAI SDK; an error of a run without it cannot be one)
        asr = sys.modules.get("pytest_duplexact.listen.transcribe_openai")
        if asr is not None:
            short += (asr.TranscriptionError,)
        if not isinstance(exc, short) \
                or not model_errors.wanted(self.config):
            return None  # pytest's own report
        params = getattr(getattr(item, "callspec", None), "params", {})
        inst = params.get("duplexact_instance")
        error_file = RunDir(self.run_dir).instance(inst.id) / ERROR_FILE \
            if inst is not None else None
        text = model_errors.short_report(exc, error_file, self.run_config.invocation_dir,
                                         building=isinstance(exc, ModelBuildError))
        return model_errors.failed_report(item, call, text)

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes the testcase
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ctl = self.controller
        if self.worker:  # the controller aggregates (xdist replays the reports there)
            if report.when == "teardown" and self._pytest_session is not None \
                    and self._stop_file.exists():  # the controller's budget stopped the run
                self._pytest_session.shouldstop = "duplexact: budget reached"
            return
        from .junit import flat_properties

        kept = []
        for name, value in report.user_properties:
            if name == PROPERTY:
                ctl.outcomes[report.nodeid] = value
                kept += [p for p in flat_properties(value) if p not in kept]
            elif name == USAGE_PROPERTY:
                ctl.usage[report.nodeid] = value
            elif name == CONCURRENCY_PROPERTY:
                ctl.admitted[report.nodeid] = value
            else:
                kept.append((name, value))
        report.user_properties = kept
        if report.when == "teardown":
            self._bill(report.nodeid)
            if ctl.budget is not None:
                self._check_budget()

    # --- the budget (spend/budget.py) ---------------------------------------------------------

    def _bill(self, nodeid: str) -> None:
        """Add a finished test's usage to what this invocation's own trials billed (outcomes a
        resume reused cost nothing now): once per test, as it finishes, so the budget's check
        after each test does not re-add the whole run."""
        ctl = self.controller
        outcome = ctl.outcomes.get(nodeid)
        if outcome is None or nodeid not in ctl.usage or nodeid in ctl.billed_ids \
                or outcome.get("id") in self.resumed:
            return
        ctl.billed_ids.add(nodeid)
        ctl.billed = usage.total([ctl.billed, ctl.usage[nodeid]])

    def _in_flight(self) -> int:
        """Trials running while the controller decides: under xdist every worker's (at most
        ``concurrency`` each), serially the prefetcher's."""
        from .spend import workers

        if self.worker or self._pytest_session is None:
            return 0
        n = workers(self.config)
        if n > 1:
            return n * max(1, self.run_config.concurrency or 1)
        pre = self.runner.harness.prefetcher if self.runner.harness is not None else None
        return pre.in_flight() if pre is not None else 0

    def _left(self) -> set[str]:
        """The selected instances (those pytest runs) without an outcome yet."""
        ctl = self.controller
        expected = ctl.expected if ctl.expected is not None else {i.id for i in
                                                                   self.instances}
        return expected - {d.get("id") for d in ctl.outcomes.values()}

    def _may_start(self) -> bool:
        """May another trial start now (the prefetcher asks before it starts one)?"""
        if self.worker:
            return not self._stop_file.exists()
        budget = self.controller.budget
        return budget is None or budget.admits(self._in_flight())

    def _check_budget(self) -> None:
        """After each test: once the budget says no new trial may start, stop pytest before
        the next test, unless that test's trial is already in flight (it finishes and is
        scored first); under xdist, tell the workers and xdist's scheduler. A run with
        nothing left is complete, not stopped: the limit passed during its last trial."""
        ctl, runner = self.controller, self.runner
        ctl.budget.record(ctl.billed, len(ctl.billed_ids))
        if not self._left() or ctl.budget.admits(self._in_flight()) \
                or self._pytest_session is None:
            return
        from .spend import workers

        reason = "duplexact: the budget stopped the run (its note above says how to resume)"
        if workers(self.config) > 1:
            try:
                write_json(self._stop_file, {"reason": ctl.budget.stopped})
            except OSError:
                pass  # the workers then stop when xdist shuts them down
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None and not dsession.shouldstop:
                dsession.shouldstop = reason
            return
        nxt = runner.next_item
        inst = getattr(getattr(nxt, "callspec", None), "params", {}).get("duplexact_instance")
        pre = runner.harness.prefetcher if runner.harness is not None else None
        if inst is not None and pre is not None and pre.started(inst.id):
            return  # in flight: it finishes and is scored; the next test decides again
        self._pytest_session.shouldstop = reason

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        ctl = self.controller
        self._pytest_session = session
        if not self.worker:
            ctl.termination.install()
        interrupt.install()  # a Ctrl-C no callback can swallow (pipelines/interrupt.py)
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if not self.worker and tr is not None:  # shown before the long run starts
            for line in ctl.notices + ctl.messages:
                tr.write_line(line)
            ctl.messages.clear()  # said once (resume); the summary adds what comes later
        if not self.worker and self.measuring:
            from . import live_progress

            mode = live_progress.resolve(self.run_config.progress, tr)
            if mode != "off":
                ctl.progress = live_progress.Progress(self, mode, tr)
                self.config.pluginmanager.register(ctl.progress, "duplexact-progress")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        if self.worker:
            return
        new_status = self.finish(int(exitstatus))
        if new_status is not None:
            session.exitstatus = new_status
        shard = self.run_config.selection.shard
        if int(session.exitstatus) == pytest.ExitCode.NO_TESTS_COLLECTED and shard \
                and not self.instances and self.measuring:
            # a small dataset over many shards leaves some empty: pytest's 5 would fail the
            # array task (the recipes go on to the merge on 0 or 1 only), and the merge
            # needs this shard's (empty) report
            session.exitstatus = pytest.ExitCode.OK
            self.controller.messages.append(
                f"duplexact: shard {shard[0]}/{shard[1]} holds none of the selected instances "
                "(more shards than this selection fills); its empty report is written for "
                "the merge, exit status 0")

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        ctl = self.controller
        if self.worker or ctl.report is None:
            return
        from ..report.views.terminal import render

        for line in render(ctl.report, ctl.gate_results):
            terminalreporter.write_line(line)
        for line in ctl.messages:
            terminalreporter.write_line(line)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        interrupt.acknowledge()  # pytest is ending the session: the report's waits may run

    def pytest_unconfigure(self, config) -> None:
        ctl = self.controller
        ctl.termination.uninstall()
        interrupt.uninstall()
        if ctl.progress is not None:
            config.pluginmanager.unregister(ctl.progress)
        if ctl.lock is not None:
            ctl.lock.release()
        if self.runner.harness is not None:
            self.runner.harness.close()

    # --- the end of the run (controller) -----------------------------------------------------

    def finish(self, exitstatus: int) -> int | None:
        """Build and write the report, evaluate gates; returns the new exit status when gates
        decide it."""
        from ..report import builder, model

        ctl = self.controller

        if not self.measuring:  # --collect-only: nothing measured, nothing to report
            return None
        config, run = self.config, self.run_config
        outcomes = [InstanceOutcome.from_dict(d) for d in ctl.outcomes.values()]
        from ..spend.cost import PriceError, load_prices

        try:
            prices = load_prices(run.prices)
        except PriceError as e:  # checked at start; a file changed mid-run still ends the run
            prices = None
            ctl.messages.append(f"duplexact: WARNING: no cost estimate: {e}")
        notes = list(ctl.notes)
        expected = ctl.expected if ctl.expected is not None else {i.id for i in
                                                                   self.instances}
        missing = len(self._left())
        if ctl.budget is not None and not missing:
            ctl.budget.stopped = None  # the limit passed as the last trial ran: complete
        stopped = ctl.budget is not None and ctl.budget.stopped
        if stopped:  # one line says why the report is incomplete and how to finish it
            notes.append(f"{ctl.budget.stopped} after {len(outcomes):,} of "
                         f"{len(expected):,} instances; resume with "
                         f"{self.resume_command()}" + (
                             f" ({missing:,} selected instance(s) have no outcome)"
                             if missing else ""))
        elif missing:  # the report is incomplete: say so in it, and how to finish it
            notes.append(
                f"{missing} of {len(expected)} selected instance(s) have no outcome "
                "(interrupted, stopped, or lost with a crashed worker); "
                f"{self.resume_command()} runs them")
        if ctl.termination.received and missing:
            ctl.messages.append(
                f"duplexact: stopped by {ctl.termination.received} (a scheduler's time "
                f"limit, a preemption or a kill) after {len(outcomes):,} of {len(expected):,} "
                f"instances; resume with {self.resume_command()}")
        if ctl.budget is not None:
            try:
                self._stop_file.unlink()
            except OSError:
                pass
        baseline = ctl.baseline
        # the same function merge builds its report with: every section, in report.json order
        report = builder.build(
            builder.Ran(outcomes, self.settings, run.model, [i.id for i in self.instances]),
            builder.Spent(
                usage=usage.total(ctl.usage.values()), prices=prices, estimate=ctl.estimate,
                measured=model.Measured(round(time.monotonic() - ctl.started, 1),
                                        len(ctl.billed_ids),
                                        **(concurrency_measured(list(ctl.admitted.values()))
                                           or {})),
                budget=ctl.budget.to_dict() if ctl.budget is not None else None),
            gates=run.gates, notes=notes, timing_tolerance_ms=run.timing_tolerance_ms,
            baseline=builder.BaselineGate(baseline, run.baseline_alpha,
                                          run.baseline_ignore_borderline) if baseline else None)
        if run.autosave or run.compare:  # the store's runs of this model under other channels
            report = self._with_robustness(report)
        report, hook_failed = self._run_report_hook(report)
        ctl.report, ctl.gate_results = report, list(report.gate_list())
        from .junit import add_suite_properties

        add_suite_properties(config, report)
        unwritten = []
        # the run dir's copy stays private (None: 0600); the one the user named gets the
        # umask's mode (a shared folder's teammates read it)
        for path, mode in ((RunDir(self.run_dir).report_file, None), (run.report, FILE_MODE)):
            if not path:
                continue
            try:  # each copy says where its recordings are, relative to itself ("." in it)
                where = Path(path).resolve().parent
                try:
                    rel = os.path.relpath(self.run_dir, where)
                except ValueError:  # another drive (Windows)
                    rel = str(self.run_dir)
                write_json(Path(path), report.replace(run_dir=Path(rel).as_posix()).to_json(),
                           mode)
            except OSError as e:  # full disk, read-only folder: say so once, keep the outcomes
                unwritten.append((f"duplexact: ERROR: could not write {path}: {e}",
                                  _once_fixed(e, Path(path))))
        if unwritten:
            ctl.messages += [line for line, _ in unwritten] + [
                f"duplexact: the finished instances are journaled in "
                f"{RunDir(self.run_dir).instances}; {unwritten[0][1]}, "
                f"{self.resume_command()} writes the report"]
            return 1 if exitstatus in (0, 1) else None
        self._publish(report)
        ctl.messages.append(f"duplexact: run directory {self.run_dir} (recordings, "
                            "timelines, report.json)")
        if isinstance(hook_failed, KeyboardInterrupt):
            return pytest.ExitCode.INTERRUPTED
        if hook_failed is not None and exitstatus in (0, 1):
            return 1
        if not (run.gates or baseline) or exitstatus not in (0, 1):
            return None  # no gates: pytest's own semantics; interrupted / usage errors stay
        # gates pass a complete run only (-x or a lost worker left some unrun): pytest's own
        # failure (1) stays, a 0 becomes 1
        status, said = builder.gated_exit(report, missing, len(expected))
        if said:
            ctl.messages.append(f"duplexact: {said}")
        return status

    def _run_report_hook(self, report):
        """The report as the ``pytest_duplexact_report`` hooks leave it, with ``extra`` made
        strict JSON (a note says what changed), and what a hook raised (None if nothing).
        Whatever a hook does (raise anything, ``pytest.fail``, ``sys.exit``, Ctrl-C), the
        measured report is written: a hook that raised only loses its ``extra``."""
        from ..remote.netsafety import mask_secrets
        from ..report.hookspec import json_safe

        try:
            self.config.hook.pytest_duplexact_report(report=report, config=self.config)
        except BaseException as e:  # a user's hook: its bug must not cost the measured report
            self.controller.messages.append(
                "duplexact: ERROR: a pytest_duplexact_report hook raised "
                f"{type(e).__name__}: {mask_secrets(str(e))}; report.json is written without "
                "what hooks add (extra), and the run fails")
            return report.replace(extra={}), e  # what it added before raising: not trusted
        extra, changed = json_safe(report.extra)
        if not changed:
            return report, None
        note = ("extra (a pytest_duplexact_report hook's) was not strict JSON; written with "
                f"{', '.join(sorted(changed))}")
        self.controller.messages.append(f"duplexact: WARNING: {note}")
        return report.replace(extra=extra, notes=(*(report.notes or ()), note)), None

    def _with_robustness(self, report):
        """The robustness section (report/sections/robustness.py) over the run store, when it holds
        runs of this model and data under another channel; a store that cannot be read
        leaves the report without it."""
        from ..report.sections import robustness

        try:
            sec = robustness.section(report, robustness.stored_reports(self.run_config.store))
        except (OSError, ValueError) as e:
            self.controller.messages.append(f"duplexact: WARNING: no robustness section: {e}")
            return report
        return report if sec is None else report.replace(robustness=sec)

    def _publish(self, report) -> None:
        """Where else the report goes: the run store (--duplexact-autosave) and the GitHub
        Actions job summary. Either failing is said, never fatal: the run dir has the
        report."""
        from ..report.store import saved as store
        from ..report.views import job_summary

        ctl = self.controller

        if self.run_config.autosave:
            try:
                saved = store.save(report, self.run_config.store)
                ctl.messages.append(f"duplexact: stored this run as {saved}")
            except OSError as e:
                ctl.messages.append(f"duplexact: WARNING: could not store this run: {e}")
        try:
            written = job_summary.append(report, report_path=str(RunDir(self.run_dir)
                                                                  .report_file))
        except OSError as e:
            ctl.messages.append(f"duplexact: WARNING: could not write the job summary: {e}")
        else:
            if written:
                ctl.messages.append(f"duplexact: summary appended to {written}")


def _users_input(exc: Exception) -> bool:
    """A factory's refusal of what the user passed (a bad option value or type, an unknown
    name) rather than a failure of what it loads (weights, memory, a device)."""
    return isinstance(exc, (TypeError, ValueError, LookupError, ImportError))


def _unreachable(exc: BaseException | None) -> str | None:
    """What could not be reached, when the error, or one it was raised from, says nothing
    answered at its address: ``"model"`` (the model's server) or ``"service"`` (a remote
    transcriber or judge: remote/calls.ServiceUnreachable); else None."""
    from ..models.streaming_contract import ServerUnreachable
    from ..remote.calls import ServiceUnreachable

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ServerUnreachable):
            return "model"
        if isinstance(exc, ServiceUnreachable):
            return "service"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
