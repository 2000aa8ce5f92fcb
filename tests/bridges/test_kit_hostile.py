"""The kit (bridges/kit.py) against hostile clients: one that takes its READY and sends
nothing cannot hold the only slot (``input_timeout``), and connections that queue for a slot
and leave get no model session (issue 32 item 4)."""

from __future__ import annotations

import numpy as np
from websockets.sync.client import connect

from pytest_duplexact.bridges import wire
from tests.bridges.support import served
from tests.bridges.test_kit import FRAME, Echo, ready, recv


def opened(model: Echo) -> int:
    return sum(1 for entry in model.log if entry[0] == "open")


def test_an_idle_client_loses_its_slot_at_the_input_deadline():
    model = Echo()
    with served(model, input_timeout=1.0) as server:
        with connect(server.url) as idle:
            ready(idle)  # ... and says nothing more
            with connect(server.url, open_timeout=30) as next_client:
                kind, payload = recv(next_client, timeout=120)  # once the idle one is ended
                assert kind == wire.READY and wire.parse_ready(payload).model == "echo"
                next_client.send(wire.audio(np.zeros(FRAME, np.float32)))
                assert recv(next_client)[0] == wire.AUDIO
                next_client.send(wire.frame(wire.CLOSE))
            kind, payload = recv(idle, timeout=30)
    assert kind == wire.ERROR
    assert wire.utf8(payload) == ("no message from the client within 1 s (the server's "
                                  "--input-timeout) after step 0")
    assert opened(model) == 2 and model.log.count(("close", "", 0)) == 1


def test_connections_that_leave_while_queued_get_no_session():
    model = Echo()
    with served(model) as server:
        with connect(server.url) as holder:
            ready(holder)
            for _ in range(20):  # each waits for the slot, then goes
                with connect(server.url, open_timeout=10):
                    pass
            holder.send(wire.frame(wire.CLOSE))
            assert recv(holder)[0] == wire.CLOSE
        with connect(server.url) as last:  # served, and only after every leaver was skipped
            assert ready(last).model == "echo"
            last.send(wire.frame(wire.CLOSE))
            assert recv(last)[0] == wire.CLOSE
    assert opened(model) == 2, model.log
