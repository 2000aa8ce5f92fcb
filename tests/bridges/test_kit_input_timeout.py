"""The kit's idle limit (``--input-timeout``) defaults to the client's own step timeout: one
silent client holds a one-session bridge no longer than an honest lockstep client would have
waited on its step before giving up (before: 300 s behind a client that sent nothing)."""

from __future__ import annotations

import dataclasses

from pytest_duplexact.bridges import kit, wire
from pytest_duplexact.models.providers.bridge import BridgeClient


def test_the_kits_idle_limit_defaults_to_the_clients_step_timeout():
    step_timeout = {f.name: f.default for f in dataclasses.fields(BridgeClient)}["step_timeout"]
    assert step_timeout == wire.STEP_TIMEOUT_S == 30.0
    assert kit.INPUT_TIMEOUT_S == step_timeout
    assert kit.parser("bridge").parse_args([]).input_timeout == step_timeout
    assert kit.parser("bridge").parse_args(["--input-timeout", "120"]).input_timeout == 120
