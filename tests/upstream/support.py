"""The upstream harness's shared pieces: where the authors' checkouts and environments are,
the skip when they are absent, and the table each module adds its measured row to.

Layout under ``$DUPLEXACT_UPSTREAM_DIR`` (docs/models.md, "Checked against the authors' code"):

    <owner>+<name>/        a git checkout of the author's repository (a work tree)
    <owner>+<name>.venv/   optional: the Python environment the author's code runs in
                           (its packages are listed per model in that module's docstring);
                           absent, the author's code runs in this interpreter

Nothing here or in the modules copies the authors' code: their processes are started from
their checkout, with our stubs put first on their ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

UPSTREAM_ENV = "DUPLEXACT_UPSTREAM_DIR"
# Where benchmarks/upstream.py collects each module's row (a JSON-lines file), when set.
TABLE_ENV = "DUPLEXACT_UPSTREAM_TABLE"
STUBS = Path(__file__).resolve().parent / "stubs"


@dataclass(frozen=True)
class Checkout:
    """One author's repository as the harness found it."""

    repo: str            # owner/name, as GitHub spells it
    path: Path           # the work tree
    commit: str          # HEAD's full hash
    date: str            # HEAD's commit date, YYYY-MM-DD
    python: str          # the interpreter its code runs under

    @property
    def short(self) -> str:
        return f"{self.repo}@{self.commit[:12]}"


def upstream_root() -> Path | None:
    value = os.environ.get(UPSTREAM_ENV, "")
    return Path(value) if value else None


def checkout(repo: str) -> Checkout:
    """The checkout of ``owner/name``, or a skip that says what to set and where."""
    root = upstream_root()
    if root is None:
        pytest.skip(f"{UPSTREAM_ENV} is not set: it names a folder holding the authors' "
                    f"checkouts (<owner>+<name>/), e.g. {repo.replace('/', '+')}/")
    path = root / repo.replace("/", "+")
    if not (path / ".git").exists():
        pytest.skip(f"{UPSTREAM_ENV}={root} has no checkout of {repo} at {path}")
    head = subprocess.run(["git", "-C", str(path), "log", "-1", "--format=%H %cs"],
                          capture_output=True, text=True, check=True).stdout.split()
    venv = root / (path.name + ".venv") / "bin" / "python"
    return Checkout(repo, path, head[0], head[1], str(venv) if venv.exists() else sys.executable)


def record_row(model: str, ck: Checkout, **measured: object) -> None:
    """Adds this model's measured row to the harness table (benchmarks/upstream.py prints it).
    Keys used across modules: connects, audio, text, barge_in_stop (bool or None = not
    applicable), onset_err_ms_median, onset_err_ms_max, sessions (at once), notes."""
    path = os.environ.get(TABLE_ENV)
    if not path:
        return
    row = {"model": model, "checked": ck.short, "date": ck.date, **measured}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, sort_keys=True) + "\n")


# --- starting the author's server ------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"
START_S = 180.0   # the author's server must listen within this (imports, a VAD network)


def printed_command(model: str) -> str:
    """The start command ``duplexact models`` and docs/models.md print for ``model`` (its
    native-server route in models/paper_models.py), checked to be the one the docs show."""
    from pytest_duplexact.models.catalogue.paper_models import ROUTES

    start = ROUTES[model][0].start.split(": ", 1)[1]
    assert start in DOCS.read_text(encoding="utf-8"), \
        f"docs/models.md does not print {model}'s start command {start!r}"
    return start


def docs_commands(start: str) -> list[list[str]]:
    """Every command docs/models.md prints that begins ``start`` and has arguments, as argv,
    in page order: a code block's line (continuation lines joined, a trailing comment dropped)
    or an inline code span (which may wrap across lines)."""
    import re
    import shlex

    text = DOCS.read_text(encoding="utf-8")
    found = [(m.start(), " ".join(m[1].split()))
             for m in re.finditer(f"`({re.escape(start)}\\s[^`]+)`", text)]
    lines, at = text.splitlines(keepends=True), 0
    for k, line in enumerate(lines):
        cmd = line.strip()
        if cmd.startswith(start + " "):
            while cmd.endswith("\\") and k + 1 < len(lines):
                k += 1
                cmd = cmd[:-1] + " " + lines[k].strip()
            found.append((at, cmd))
        at += len(line)
    assert found, f"docs/models.md prints no command starting {start!r}"
    return [shlex.split(cmd, comments=True) for _, cmd in sorted(found)]


def docs_command(start: str) -> list[str]:
    """The first of ``docs_commands(start)``: the one the harness runs."""
    return docs_commands(start)[0]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tree(ck: Checkout, dest: Path, writable: tuple[str, ...] = (),
             replaced: dict[str, Path] | None = None) -> Path:
    """A folder laid out like the checkout, made of symbolic links to its files, where the
    author's code can be started as from its checkout without writing into it: the folders
    named in ``writable`` (and their parents) are real, so what the server writes there at
    start (a certificate, a cache) lands in ``dest``; an entry of ``replaced`` (a path in the
    checkout -> our stub) links to our stub instead (the model's own package, for one)."""
    replaced = {Path(k): v for k, v in (replaced or {}).items()}
    real = {Path(w) for w in writable}
    real |= {p for w in writable for p in Path(w).parents if p != Path(".")}
    dest.mkdir(parents=True, exist_ok=True)

    def fill(rel: Path) -> None:
        for child in sorted((ck.path / rel).iterdir()):
            if child.name == ".git":
                continue
            r = rel / child.name
            if r in replaced:
                (dest / r).symlink_to(replaced[r])
            elif r in real and child.is_dir():
                (dest / r).mkdir(exist_ok=True)
                fill(r)
            else:
                (dest / r).symlink_to(child)
    fill(Path("."))
    for w in writable:  # a folder the README has you create (a model's resources)
        (dest / w).mkdir(parents=True, exist_ok=True)
    return dest


class Server:
    """The author's server, started by a shell command line in its run folder with our stubs
    first on ``PYTHONPATH`` and its environment's ``bin`` first on ``PATH`` (so the printed
    ``python3`` is that environment's); stopped, its whole process group, on exit. Its output
    goes to ``log``; ``wait_port`` fails with its tail when it exits or does not listen."""

    def __init__(self, ck: Checkout, command: str, cwd: Path, stubs: list[Path], log: Path,
                 env: dict[str, str] | None = None):
        self.command, self.cwd, self.log = command, cwd, log
        bin_dir = str(Path(ck.python).parent)
        self.env = {**os.environ, **(env or {}),
                    "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
                    "PYTHONPATH": os.pathsep.join(str(s) for s in stubs),
                    "PYTHONUNBUFFERED": "1",
                    # no __pycache__ beside our stubs or, through a link, in a checkout
                    "PYTHONDONTWRITEBYTECODE": "1"}
        self.env.pop("VIRTUAL_ENV", None)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Server":
        self._out = open(self.log, "wb")
        self.proc = subprocess.Popen(["bash", "-c", self.command], cwd=self.cwd, env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def wait_port(self, port: int, deadline_s: float = START_S) -> None:
        import socket
        import time

        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited ({self.proc.returncode}) before listening:\n"
                            f"{self.tail()}")
            with socket.socket() as s:
                s.settimeout(1.0)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        pytest.fail(f"the server did not listen on {port} within {deadline_s:.0f}s:\n"
                    f"{self.tail()}")

    def wait_log(self, text: str, count: int = 1, deadline_s: float = START_S) -> None:
        """Until the server's output says ``text`` ``count`` times (its workers ready)."""
        import time

        end = time.monotonic() + deadline_s
        while self.log.read_text(errors="replace").count(text) < count:
            if self.proc.poll() is not None or time.monotonic() > end:
                pytest.fail(f"the server never said {text!r} {count} time(s) within "
                            f"{deadline_s:.0f}s:\n{self.tail()}")
            time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        import signal

        if self.proc is not None:
            # `script` puts the server in a session of its own: its processes are found as
            # descendants of ours, by id, and each is stopped
            family = [self.proc.pid, *_descendants(self.proc.pid)]
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in family:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                try:
                    self.proc.wait(10)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._out.close()


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stub_events(path: Path, event: str) -> list[float]:
    """The monotonic times the stubs logged ``event`` (tests/upstream/stubs/common)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["t"] for r in rows if r["event"] == event]


class Launched:
    """``model``'s printed start command, bound to 127.0.0.1 and a free port instead of
    ``0.0.0.0:<default_port>``, run in a folder of links to the checkout (``run_tree``'s
    ``writable`` and ``replaced``) with ``stubs`` first on its path and the stubs' decision
    log at ``self.log``; ``ready`` lines its output must show before it counts as started
    (workers that load after the server listens). A context manager."""

    def __init__(self, ck: Checkout, model: str, d: Path, stubs: list[Path], default_port: int,
                 writable: tuple[str, ...] = (), replaced: dict[str, Path] | None = None,
                 env: dict[str, str] | None = None, ready: tuple[tuple[str, int], ...] = ()):
        self.ck, self.port, self.log, self.ready = ck, free_port(), d / "stub.jsonl", ready
        self.command = (printed_command(model).replace("--ip 0.0.0.0", "--ip 127.0.0.1")
                        .replace(f"--port {default_port}", f"--port {self.port}"))
        self.tree = run_tree(ck, d / "run", writable=writable, replaced=replaced)
        self.stubs = stubs
        self.srv = Server(ck, self.command, self.tree, stubs, d / "server.log",
                          env={"DUPLEXACT_STUB_LOG": str(self.log), **(env or {})})

    def __enter__(self) -> "Launched":
        self.srv.__enter__()
        try:
            self.srv.wait_port(self.port)
            for text, count in self.ready:
                self.srv.wait_log(text, count)
        except BaseException:
            self.srv.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.srv.__exit__()

    def decisions(self, event: str) -> list[float]:
        return stub_events(self.log, event)


# --- what the user says ----------------------------------------------------------------------

SPEECH_S = 1.3  # "Okay, thanks for": one utterance, no pause in it as long as the stubs' 0.5 s


def speech() -> np.ndarray:
    """A short utterance of real speech (16 kHz; the package's asset), loud enough for the
    authors' silero VADs and the stubs' energy rule alike."""
    from pytest_duplexact import models
    from pytest_duplexact.data import audio

    return audio.read(Path(models.__file__).parent / "assets" / "response.flac")[
        :int(SPEECH_S * 16000)]


def user_turns(starts: tuple[float, ...], total: float) -> np.ndarray:
    """``total`` seconds of 16 kHz silence with the utterance at each start (s)."""
    x, said = np.zeros(int(total * 16000), np.float32), speech()
    for s in starts:
        a = int(s * 16000)
        x[a:a + len(said)] = said
    return x
