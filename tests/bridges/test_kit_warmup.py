"""The bridge kit's warm-up (bridges/kit.py, ``BridgeServer.start``): a model's ``warmup()``
runs once, in the thread that runs its steps, before the port is bound, so READY means ready;
``--no-warmup`` skips it; a failing warm-up serves nothing and exits with one line."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest
from websockets.sync.client import connect

from pytest_duplexact.bridges import BridgeServer, WarmupFailed, main, parser, wire
from tests.bridges.support import served
from tests.bridges.test_kit import Echo, ready, recv


class Cold(Echo):
    """An echo that must be warmed before it can step (a lazily compiled model)."""

    def __init__(self, fail: bool = False):
        super().__init__()
        self.fail = fail
        self.warmups: list[str] = []  # the thread each warm-up ran in
        self.bound_at_warmup: list[bool] = []
        self.server: BridgeServer | None = None

    def warmup(self):
        self.warmups.append(threading.current_thread().name)
        if self.server is not None:
            self.bound_at_warmup.append(self.server.url != "")
        if self.fail:
            raise RuntimeError("cannot compile")

    def open(self, options, trial):
        if not self.warmups:
            raise RuntimeError("stepped cold")
        session = super().open(options, trial)
        step = session.step
        session.step = lambda frame: (self.log.append(threading.current_thread().name),
                                      step(frame))[1]
        return session


def test_the_warm_up_runs_once_in_the_model_thread_before_the_server_listens(caplog):
    caplog.set_level(logging.INFO, logger="pytest_duplexact.bridges")
    model = Cold()
    with served(model) as server:
        assert server.warmup_s is not None and server.warmup_s >= 0
        for _ in range(2):  # trials do not warm up again
            with connect(server.url) as ws:
                ready(ws)
                ws.send(wire.audio(np.full(320, 0.5, np.float32)))
                while (kind := recv(ws)[0]) != wire.AUDIO:
                    assert kind != wire.ERROR
                ws.send(wire.frame(wire.CLOSE))
                assert recv(ws)[0] == wire.CLOSE
    assert model.warmups == ["bridge-model"]
    assert "bridge-model" in model.log  # the steps ran in the warm-up's thread
    assert "model echo: warmed up in" in caplog.text


def test_warm_up_happens_before_the_port_is_bound():
    model = Cold()
    server = BridgeServer(model)
    model.server = server

    async def go():
        await server.start("127.0.0.1", 0)
        await server.close()

    asyncio.run(go())
    assert model.bound_at_warmup == [False]


def test_no_warmup_skips_it():
    assert parser("x").parse_args(["--no-warmup"]).no_warmup
    model = Cold()
    with served(model, warmup=False) as server:
        with connect(server.url) as ws:
            kind, payload = recv(ws)
        assert server.warmup_s is None
    assert model.warmups == []
    assert kind == wire.ERROR and "stepped cold" in wire.utf8(payload)


def test_a_failing_warm_up_serves_nothing_and_exits_with_one_line():
    model = Cold(fail=True)
    server = BridgeServer(model)

    async def go():
        with pytest.raises(WarmupFailed, match="model echo: the warm-up failed "
                                               r"\(RuntimeError: cannot compile\)"):
            await server.start("127.0.0.1", 0)

    asyncio.run(go())
    assert server.url == "" and server._server is None
    with pytest.raises(SystemExit) as exit_:
        main(lambda args: Cold(fail=True), prog="cold", argv=["--port", "0"])
    assert str(exit_.value).startswith("model echo: the warm-up failed")
    assert "\n" not in str(exit_.value)
