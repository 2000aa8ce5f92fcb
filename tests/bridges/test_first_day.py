"""A model team's first day with a bridge (issue 31), each mistake run as the user types it:
`pytest --duplexact-model=bridge ...` against the real kit on 127.0.0.1 (the refusals in
process, the runs in a subprocess), its output's length, exit status and words checked.

* a refusal before the run (bridge not started, an option the server refuses, wss:// against a
  ws:// server, no bridge at the address, a wrong key, a typo of the client's own option, a
  --duplexact-batch above the server's max_sessions) is one ``ERROR:`` line, exit status 4, no
  traceback, no run folder and no resume hint;
* `duplexact models` prints a route as a command that runs when pasted;
* the name the server gives is in run.json, report.json and every view;
* a bridge that dies mid-run stops the run after 3 instances that could not connect, with one
  line saying how to resume;
* a queued trial that gets no READY closes its connection (it held a server slot);
* the kit's own command line: --max-sessions goes into READY; a port in use is one line."""

from __future__ import annotations

import http.server
import json
import re
import shlex
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from pytest_duplexact.bridges import typed_options, wire
from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import SessionInfo
from pytest_duplexact.models.streaming_contract import TransientModelError
from tests.bridges.support import served
from tests.bridges.test_example import example
from tests.support.inner_runs import as_user, runner, said
from tests.support.servers import LISTENING, child, threaded

NAME = "quiet-ckpt-7"  # the served model's name, which the report must show


class _Silence:
    def step(self, frame):
        return np.zeros(1920, np.float32)

    def close(self):
        pass


class Quiet:
    """A stepped model that says nothing; one server option, ``delay``."""

    name, mode, transcript = NAME, "stepped", True
    sample_rate, frame = 24_000, 1_920

    def open(self, options, trial):
        typed_options(options, {"delay": 0.0})
        return _Silence()


@pytest.fixture(scope="module")
def bridge():
    with served(Quiet()) as server:  # max_sessions: the kit's default, 1
        yield server


def refused_in_one_line(pytester, res, *words: str) -> str:
    lines = said(res)
    assert res.ret == 4, lines
    assert len(lines) <= 2, lines  # the ERROR line (and at most a blank-free trailer)
    line = next(x for x in lines if x.startswith("ERROR: "))
    for w in words:
        assert w in line, (w, line)
    text = "\n".join(lines)
    assert "Traceback" not in text and "resume" not in text, text
    assert not (pytester.path / "duplexact-runs").exists()  # no run folder left behind
    return line


# The refusals run in process, as tests/plugin/test_first_day.py's do: each run builds its own
# config and session as a new pytest process does (exit status, terminal output, no folder),
# without a process start's ~2 CPU-s; pytest-asyncio off, as in a user's folder.
run = as_user("--duplexact-model=bridge", "-p", "no:cacheprovider", "--duplexact-limit=1",
              timeout=120)  # "refused, not hung": 120 s
# a process of its own where the test's server runs in this one and logs to its stderr
run_elsewhere = runner("--duplexact-model=bridge", "-p", "no:cacheprovider",
                       "--duplexact-limit=1", timeout=120)


# --- the preflight: one line, exit 4, before any run folder --------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def plain_http():
    """An HTTP server that is not a bridge (a file server, as `python -m http.server`)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.SimpleHTTPRequestHandler)
    with threaded(server) as port:
        yield f"ws://127.0.0.1:{port}"


def test_a_bridge_not_started_is_one_line(pytester):
    res = run(pytester, f"--duplexact-model-option=url=ws://127.0.0.1:{_closed_port()}")
    refused_in_one_line(pytester, res, "could not connect", "is the bridge running at ws://")


def test_an_option_the_server_refuses_is_one_line(pytester, bridge):
    res = run(pytester, f"--duplexact-model-option=url={bridge.url}",
              "--duplexact-model-option=dealy=1.0")
    refused_in_one_line(pytester, res, "refused the trial", "unknown option(s) dealy",
                        "known: delay")


def test_wss_against_a_ws_bridge_is_one_line(pytester, bridge):
    url = bridge.url.replace("ws://", "wss://")
    res = run(pytester, f"--duplexact-model-option=url={url}")
    refused_in_one_line(pytester, res, "does not answer TLS",
                        f"use url={bridge.url}")


def test_a_self_signed_bridge_without_ca_file_is_one_line(pytester):
    from tests.fakes.fake_http import self_signed_tls

    with served(Quiet(), ssl=self_signed_tls()) as server:
        res = run(pytester, f"--duplexact-model-option=url={server.url}")
    refused_in_one_line(pytester, res, "certificate is not trusted", "ca_file=CERT.pem")


def test_an_address_that_is_no_bridge_is_one_line(pytester):
    with plain_http() as url:
        res = run_elsewhere(pytester, f"--duplexact-model-option=url={url}")
    refused_in_one_line(pytester, res, "not as a WebSocket server", "ws:// or wss://")


def test_a_wrong_key_is_one_line(pytester, monkeypatch):
    monkeypatch.setenv("DUPLEXACT_BRIDGE_API_KEY", "not-the-key")
    with served(Quiet(), api_key="the-servers-key") as server:
        res = run(pytester, f"--duplexact-model-option=url={server.url}")
    line = refused_in_one_line(pytester, res, "refused the key (HTTP 401)",
                               "DUPLEXACT_BRIDGE_API_KEY")
    assert "not-the-key" not in line


def test_a_typo_in_the_clients_own_option_says_which(pytester, bridge):
    res = run(pytester, f"--duplexact-model-option=ulr={bridge.url}")
    refused_in_one_line(pytester, res, "unknown option 'ulr' (did you mean 'url'?)")


def test_a_batch_above_the_bridges_max_sessions_is_refused_not_hung(pytester, bridge):
    """The kit serves one trial at a time by default; --duplexact-batch=4 used to queue three
    connections behind the first, each waiting 60 s for its READY."""
    res = run(pytester, f"--duplexact-model-option=url={bridge.url}", "--duplexact-batch=4")
    refused_in_one_line(pytester, res, "--duplexact-batch=4", "runs 1 trial(s) at once",
                        "--duplexact-batch=1", "--max-sessions 4")


def test_ready_carries_max_sessions_and_a_ready_without_it_is_unknown():
    with served(Quiet(), max_sessions=3) as server:
        assert resolve_model("bridge", url=server.url).ready.max_sessions == 3
    old = json.dumps({"protocol": "duplexact-bridge", "version": 1, "mode": "stepped",
                      "sample_rate": 24000, "frame": 1920, "transcript": True})
    assert wire.parse_ready(old.encode()).max_sessions is None  # v1 before it: unknown
    with pytest.raises(wire.ProtocolError, match="max_sessions must be a positive integer"):
        wire.parse_ready(old[:-1].encode() + b', "max_sessions": 0}')


def test_a_queued_trial_without_ready_closes_its_connection():
    """A connection left open when READY does not come keeps its place in the server's
    queue: once the slot frees, the server would start a trial nobody steps."""
    with served(Quiet()) as server:
        holder = resolve_model("bridge", url=server.url)
        queued = resolve_model("bridge", url=server.url, ready_timeout="0.5")
        holder.start(SessionInfo(instance=None))  # takes the only slot
        with pytest.raises(TransientModelError, match="no READY.*from --duplexact-batch or -n"):
            queued.start(SessionInfo(instance=None))
        holder.finish()
        for _ in range(200):  # the two probes and both trials end on the server (a deadline,
            if server.trials == 4 and not server.sessions:  # not a timing check)
                break
            threading.Event().wait(0.1)
        assert (server.trials, len(server.sessions)) == (4, 0)


# --- duplexact models prints a command that runs; the served name in every view ---------------

def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_the_listed_command_runs_and_the_report_names_the_served_model(pytester, bridge):
    listing = _cli("models", "moshi").stdout
    line = next(x for x in listing.splitlines() if x.strip().startswith("bridge: "))
    command = line.split("bridge: ", 1)[1].rsplit("  [", 1)[0]
    argv = shlex.split(command.replace("ws://HOST:8765", bridge.url))
    assert argv[0] == "pytest" and "-o" not in argv, command  # -o is pytest's --override-ini
    res = pytester.runpytest_subprocess(
        *argv[1:], "-p", "no:cacheprovider", "--duplexact-condition=take_turn.immediate",
        "--duplexact-limit=1", "--duplexact-transcriber=native", "--duplexact-run-dir=run",
        timeout=240)
    outcomes = res.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, res.stdout.str()
    shown = f"bridge ({NAME})"
    assert f"DuplexAct results for {shown}" in res.stdout.str()

    run_dir = pytester.path / "run"
    served_as = json.loads((run_dir / "run.json").read_text())["settings"]["served"]
    assert served_as["model"] == NAME and "stepped, 24000 Hz" in served_as["description"]
    report = run_dir / "report.json"
    assert json.loads(report.read_text())["settings"]["served"] == served_as

    out = _cli("report", str(report), "--html", "page.html", "--markdown", "page.md",
               cwd=pytester.path)
    assert out.returncode == 0, out.stderr
    html = (pytester.path / "page.html").read_text()
    assert re.search(rf"<title>[^<]*{re.escape(shown)}", html), html[:400]
    assert served_as["description"] in html
    assert f"## DuplexAct: {shown}" in (pytester.path / "page.md").read_text()
    out = _cli("compare", str(report), str(report), "--html", "compare.html",
               cwd=pytester.path)
    assert f"B: {report}: {shown}" in out.stdout, out.stdout + out.stderr
    page = (pytester.path / "compare.html").read_text()
    assert f"DuplexAct comparison: A {shown} vs B {shown}" in page


class OtherCheckpoint(Quiet):
    name = "quiet-ckpt-8"


def test_a_resume_against_another_served_model_is_refused(pytester):
    """Same URL, another checkpoint behind it: the run's outcomes would mix two models."""
    with served(Quiet()) as first:
        url, port = first.url, int(first.url.rsplit(":", 1)[1])
        done = pytester.runpytest_subprocess(
            "--duplexact-model=bridge", f"--duplexact-model-option=url={url}",
            "--duplexact-condition=take_turn.immediate", "--duplexact-limit=1",
            "--duplexact-transcriber=native", "--duplexact-run-dir=run", "-p",
            "no:cacheprovider", timeout=240)
    assert done.ret in (0, 1), done.stdout.str()
    with served(OtherCheckpoint(), port=port):
        res = pytester.runpytest_subprocess("--duplexact-resume=run", "-p", "no:cacheprovider",
                                            timeout=120)
    lines = said(res)
    assert res.ret == 4 and len(lines) <= 3, lines  # the resume's own line, then the refusal
    assert f"the server now serves 'quiet-ckpt-8'; this run was started with {NAME!r}" \
        in lines[-1], lines


# --- a bridge that dies mid-run ------------------------------------------------------------

DYING = '''
import os
import numpy as np
from pytest_duplexact.bridges import main


class Silence:
    def step(self, frame):
        return np.zeros(1920, np.float32)

    def close(self):
        pass


class Dying:
    name, mode, transcript = "dying", "stepped", True
    sample_rate, frame = 24_000, 1_920
    trials = 0

    def __init__(self, args):
        pass

    def open(self, options, trial):
        if trial.id:  # probes carry no trial id
            Dying.trials += 1
            if Dying.trials == 2:  # one trial runs, then the server process is gone
                os._exit(3)
        return Silence()


raise SystemExit(main(Dying, prog="dying.py"))
'''


@pytest.mark.slow
def test_a_bridge_that_dies_mid_run_stops_it_with_the_resume_line(pytester):
    script = pytester.path / "dying.py"
    script.write_text(DYING)
    with child(script, "--port", "0", ready=LISTENING, stops_on_stdin=False,
               stderr=subprocess.DEVNULL) as server:
        url = server.url
        res = pytester.runpytest_subprocess(
            "--duplexact-model=bridge", f"--duplexact-model-option=url={url}",
            "--duplexact-action=take_turn", "--duplexact-transcriber=native",
            "--duplexact-run-dir=run", "-p", "no:cacheprovider", timeout=300)
    text = res.stdout.str()
    gone = [x for x in said(res) if "is gone" in x]
    assert len(gone) == 1, text
    assert f"the model's server at {url} is gone (3 instances in a row could not connect): " \
           f"restart it, then pytest --duplexact-resume={pytester.path / 'run'}" in gone[0]
    rep = json.loads((pytester.path / "run" / "report.json").read_text())
    assert rep["totals"] == {"instances": 4, "errors": 3}, text  # one scored, kept
    assert len(rep["selected"]) == 9


# --- the kit's command line ------------------------------------------------------------------

def test_the_kits_max_sessions_and_a_port_in_use(tmp_path):
    script = tmp_path / "my_bridge.py"
    script.write_text(example(), encoding="utf-8")
    with child(script, "--port", "0", "--max-sessions", "2", ready=LISTENING,
               stops_on_stdin=False, stderr=subprocess.PIPE) as first:
        assert "2 trial(s) at once" in first.line, first.line
        port = str(first.port)
        second = subprocess.run([sys.executable, str(script), "--port", port],
                                capture_output=True, text=True, timeout=120)
    lines = [x for x in (second.stdout + second.stderr).splitlines() if x.strip()]
    assert second.returncode == 1 and len(lines) == 1, lines
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in lines[0]
    assert "choose another --port" in lines[0]
