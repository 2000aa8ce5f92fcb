"""Running the plugin end to end in subprocesses, for the journal, resume and determinism tests:
a test model on PYTHONPATH, pytest invocations in a scratch folder outside the checkout, and
report comparison apart from the volatile keys."""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pytest_duplexact.report import VOLATILE_KEYS
from pytest_duplexact.run.journal import INSTANCES_DIR, OUTCOME_FILE

ORACLE = "journal_model:oracle"  # speaks: VAD, timings and judges' inputs take part
SILENT = "journal_model:silent"  # never speaks: no VAD, so pytest-xdist workers start fast
# Direct replay, simulator replay and barge-in, one instance each: five small trials.
CONDITIONS = ("interrupt.help", "recover.repeat", "stop.direct_interruption",
              "take_turn.delayed", "wait.intra_sentential_pause")
SELECTION = ("--duplexact-condition=" + ",".join(CONDITIONS), "--duplexact-limit=1")


def sigint_default() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT. A suite started without
    job control (``cmd &`` in a script, some CI runners) ignores SIGINT, every descendant
    inherits that, and Python keeps an inherited SIG_IGN: the Ctrl-C would never land. Three
    stress runs lost it so, each read as a run that did not stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def link_audio(src: Path, dst: Path) -> None:
    """Give a test dataset the bundled audio without copying it: hard links (a symlinked
    folder would resolve outside the dataset, which the loader refuses), copies across
    file systems."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            import shutil

            shutil.copy2(a, b)

    import shutil

    shutil.copytree(src, dst, copy_function=link)


def replicated_dataset(out: Path, action: str, condition: str, copies: int) -> Path:
    """A dataset in ``out``: the bundled instances of one condition, each ``copies`` times
    (new ids ``<id>-r<k>``, the same audio), so a paired drop can reach significance."""
    from pytest_duplexact.data.instance import bundled_root

    src = bundled_root()
    out.mkdir()
    link_audio(src / "audio", out / "audio")
    lines = []
    for line in (src / "instances.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["action"] == action and d["condition"] == condition:
            lines += [json.dumps(dict(d, id=f"{d['id']}-r{r}")) for r in range(copies)]
    (out / "instances.jsonl").write_text("\n".join(lines) + "\n")
    meta = json.loads((src / "dataset.json").read_text())
    meta["instances"] = len(lines)
    (out / "dataset.json").write_text(json.dumps(meta))
    return out


def selected_ids() -> list[str]:
    """The instances SELECTION runs, in the order a serial run takes them (the suites run in
    file name order, test_<action>.py, so by action name)."""
    from pytest_duplexact.data.instance import bundled_root, load_dataset
    from pytest_duplexact.rules import requires
    from pytest_duplexact.run.selection import Selection, select

    chosen = select(load_dataset(bundled_root(), requires=requires).instances,
                    Selection(conditions=CONDITIONS, limit=1))
    return [i.id for i in sorted(chosen, key=lambda i: i.action)]

MODEL_SOURCE = '''
"""The oracle and the silent model, slowed down and optionally crashing: stepped models for
run-journal tests.

DUPLEXACT_TEST_DELAY (seconds per instance) lets a kill land mid-run; DUPLEXACT_TEST_GATE
(a folder) holds an instance's start while ``hold-<id>`` is in it, after touching ``at-<id>``
(a test waits for that, signals the run, and knows exactly where it stopped, however loaded
the machine; the hold ends by itself after two minutes); DUPLEXACT_TEST_CRASH names an instance
whose run raises (a harness error the resume must retry). None is a model option, so runs
with and without them are the same run to --duplexact-resume."""
import faulthandler
import os
import signal
import time
from pathlib import Path

from pytest_duplexact.models.providers.oracle import OracleModel

# SIGUSR1 writes every thread's stack to threads-<pid>.txt here (pytest captures the
# process's stderr): what a test that finds the run still alive past its deadline reads
# before killing it (Runner.stopped_or_explained)
faulthandler.register(signal.SIGUSR1, open(f"threads-{os.getpid()}.txt", "w"), all_threads=True)
from pytest_duplexact.models.providers.silent import SilentModel


class Slow:
    def start(self, info):
        if info.instance.id == os.environ.get("DUPLEXACT_TEST_CRASH"):
            raise RuntimeError("simulated model crash")
        time.sleep(float(os.environ.get("DUPLEXACT_TEST_DELAY", "0")))
        gate = os.environ.get("DUPLEXACT_TEST_GATE")
        hold = Path(gate, f"hold-{info.instance.id}") if gate else None
        if hold is not None and hold.exists():
            Path(gate, f"at-{info.instance.id}").touch()
            until = time.monotonic() + 120
            while hold.exists() and time.monotonic() < until:
                time.sleep(0.02)
        super().start(info)


class SlowOracle(Slow, OracleModel):
    pass


class SlowSilent(Slow, SilentModel):
    pass


def oracle():
    return SlowOracle()


def silent():
    return SlowSilent()
'''

REVERSE_SOURCE = '''
"""-p reverse_order: run the selected instances in the opposite order."""
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.reverse()
'''


class Runner:
    """Runs ``python -m pytest --duplexact-model=journal_model:...`` from ``home``."""

    def __init__(self, home: Path):
        self.home = home
        (home / "journal_model.py").write_text(textwrap.dedent(MODEL_SOURCE))
        (home / "reverse_order.py").write_text(textwrap.dedent(REVERSE_SOURCE))
        self._baselines: dict[str, tuple[dict, int]] = {}

    def env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DUPLEXACT_TEST_", "PYTEST_XDIST", "PYTEST_ADDOPTS"))}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.home),
                                                          env.get("PYTHONPATH")]))
        env.update(extra)
        return env

    def cmd(self, model: str, *args: str) -> list[str]:
        return [sys.executable, "-m", "pytest", f"--duplexact-model={model}", *SELECTION,
                "-p", "no:cacheprovider", *args]

    def run(self, model: str, *args: str, timeout: float = 240,
            **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd(model, *args), cwd=self.home, env=self.env(**env),
                              capture_output=True, text=True, timeout=timeout)

    def start(self, log: Path, model: str, *args: str, **env: str) -> subprocess.Popen:
        with open(log, "w") as out:  # the child keeps its own descriptor
            return subprocess.Popen(self.cmd(model, *args), cwd=self.home,
                                    env=self.env(**env), stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=sigint_default)

    def stopped_or_explained(self, proc: subprocess.Popen, log: Path,
                             timeout: float = 60) -> int:
        """``proc``'s exit status within ``timeout``; past it, every thread's stack (the
        journal model writes them on SIGUSR1), then a kill and a failure that shows them: a
        run that does not stop says where it is stuck."""
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            proc.kill()
            proc.wait(timeout=30)
            stacks = self.home / f"threads-{proc.pid}.txt"
            raise AssertionError(
                f"the run did not stop within {timeout:.0f} s; its threads:\n"
                f"{stacks.read_text() if stacks.exists() else '(none written)'}\n"
                f"its log:\n{log.read_text()[-3000:]}") from None

    def baseline(self, model: str = ORACLE) -> tuple[dict, int]:
        """The report and exit status of an uninterrupted serial run (once per process)."""
        if model not in self._baselines:
            run_dir = self.home / f"baseline-{model.rpartition(':')[2]}"
            res = self.run(model, f"--duplexact-run-dir={run_dir}")
            report = read_report(run_dir)
            assert res.returncode in (0, 1), res.stdout + res.stderr  # 1: the model missed
            assert report["totals"] == {"instances": len(CONDITIONS), "errors": 0}
            self._baselines[model] = report, res.returncode
        return self._baselines[model]


_RUNNERS: dict[Path, Runner] = {}


def runner(tmp_path_factory) -> Runner:
    """One Runner (and so one baseline run) per test session and process."""
    base = tmp_path_factory.getbasetemp()
    if base not in _RUNNERS:
        _RUNNERS[base] = Runner(tmp_path_factory.mktemp("duplexact-runs"))
    return _RUNNERS[base]


def read_report(run_dir: Path) -> dict:
    return json.loads((run_dir / "report.json").read_text(encoding="utf-8"))


def comparable(report: dict) -> str:
    """The report as canonical JSON without the keys that differ between identical runs."""
    return json.dumps({k: v for k, v in report.items() if k not in VOLATILE_KEYS},
                      indent=1, sort_keys=True)


def assert_same_report(got: dict, expected: dict) -> None:
    a, b = comparable(got), comparable(expected)
    if a != b:
        diff = difflib.unified_diff(b.splitlines(), a.splitlines(), "expected", "got",
                                    lineterm="", n=2)
        raise AssertionError("reports differ:\n" + "\n".join(list(diff)[:80]))


def finished(run_dir: Path) -> int:
    return len(list((run_dir / INSTANCES_DIR).glob(f"*/{OUTCOME_FILE}")))


def wait_until(predicate, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"pytest exited ({proc.returncode}) before the kill could "
                                 f"land:\n{log.read_text()[-3000:]}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"timed out waiting:\n{log.read_text()[-3000:]}")
        time.sleep(0.02)


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc (pytest-xdist's workers are the controller's)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return sorted(out)
