"""The kit's servers stop whatever happens: a child that prints its port, one that prints
something else, one that prints nothing (the read's deadline), one that ignores its stdin
closing (terminated), a bridge (SIGTERM), and a threaded server whose block raises."""

from __future__ import annotations

import http.server
import socket
import subprocess
import textwrap
import time
import urllib.error
import urllib.request

import pytest
from websockets.sync.client import connect
from websockets.sync.server import serve

from tests.support.servers import LISTENING, ChildFailed, child, threaded

SERVES = textwrap.dedent('''
    import sys
    print("PORT 4321", flush=True)
    sys.stdin.read()  # the parent's stop
    open(sys.argv[1], "w").write("stopped")
''')


def script(tmp_path, text: str):
    path = tmp_path / "server.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_child_gives_its_port_and_stops_when_its_stdin_closes(tmp_path):
    with child(script(tmp_path, SERVES), tmp_path / "truth") as fake:
        assert fake.port == 4321 and fake.proc.poll() is None
    assert fake.proc.returncode == 0 and (tmp_path / "truth").read_text() == "stopped"
    assert fake.stop() == 0  # a second stop only returns the status


def test_a_child_that_does_not_start_is_one_error_with_its_stderr(tmp_path):
    failed = script(tmp_path, 'import sys\nprint("Traceback: no module x", file=sys.stderr)\n'
                              'print("starting")\n')
    with pytest.raises(ChildFailed, match="closed its output before it was ready; its output: "
                                          "'starting\\\\n'") as e:
        child(failed, stderr=subprocess.PIPE)
    assert "no module x" in e.value.stderr


def test_reading_the_port_has_a_deadline(tmp_path):
    silent = script(tmp_path, "import time\ntime.sleep(60)\n")
    t0 = time.monotonic()
    with pytest.raises(ChildFailed, match="printed no ready line within 0.5 s"):
        child(silent, start_s=0.5)
    assert time.monotonic() - t0 < 20  # ended, not waited for


def test_a_child_that_ignores_its_stdin_is_terminated(tmp_path):
    stubborn = script(tmp_path, 'import time\nprint("PORT 1", flush=True)\ntime.sleep(60)\n')
    fake = child(stubborn, stop_s=0.3)
    with pytest.raises(ChildFailed, match="did not stop within 0.3 s"):
        fake.stop()
    assert fake.proc.returncode is not None
    # inside a failing block the block's own error is the one raised
    with pytest.raises(KeyError):
        with child(stubborn, stop_s=0.3) as again:
            raise KeyError("the test's failure")
    assert again.proc.returncode is not None


def test_a_bridge_is_ready_at_its_listening_line_and_stopped_by_sigterm(tmp_path):
    bridge = script(tmp_path, 'import time\nprint("loading weights")\n'
                              'print("listening on ws://127.0.0.1:8998 (model m)", flush=True)\n'
                              'time.sleep(60)\n')
    t0 = time.monotonic()
    with child(bridge, ready=LISTENING, stops_on_stdin=False) as served:
        assert (served.url, served.port) == ("ws://127.0.0.1:8998", 8998)
    assert served.proc.returncode == -15 and time.monotonic() - t0 < 20


def test_a_threaded_server_is_shut_down_when_its_block_raises():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    served = threaded(server, poll_s=0.02)
    with pytest.raises(KeyError):
        with served as port:
            with pytest.raises(urllib.error.HTTPError, match="501"):  # served: a bare handler
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
            raise KeyError("the test's failure")
    assert not served.thread.is_alive()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_a_websockets_server_in_a_thread():
    def echo(ws):
        for message in ws:
            ws.send(message)

    with serve(echo, "127.0.0.1", 0) as server:
        served = threaded(server)
        with served as port, connect(f"ws://127.0.0.1:{port}") as ws:
            ws.send("hi")
            assert ws.recv(timeout=10) == "hi"
    assert not served.thread.is_alive()


def test_a_threaded_server_never_started_stops_at_once():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threaded(server).stop()  # socketserver's shutdown() would wait forever here
    assert server.socket.fileno() == -1
