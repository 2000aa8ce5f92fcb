"""The three open models behind our bridges by name (models/bridged.py): built-ins, their rows
in `duplexact models` (requirements and the paper's routes), all from the one table."""

from __future__ import annotations

import importlib.util

import pytest

from pytest_duplexact.cli.model_listing import render
from pytest_duplexact.models import BUILTINS, preflight, resolve_model
from pytest_duplexact.models.catalogue.paper_models import ROUTES
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.named_bridge import BRIDGED


def test_each_bridged_model_is_a_built_in_with_a_route_and_a_bridge_module():
    listed, _ = render()
    for name, b in BRIDGED.items():
        assert name in BUILTINS
        assert importlib.util.find_spec(f"pytest_duplexact.bridges.{b.module}") is not None
        (route,) = ROUTES[name]
        assert (route.kind, route.plugin, route.start) == ("bridge", name, b.command)
        assert route.missing() is None
        assert f"bridge: pytest --duplexact-model={name} --duplexact-model-option " \
               "url=ws://HOST:8765  [needs its server]" in listed
        assert f"start: {b.command}" in listed
    assert BRIDGED["flm-audio"].command == (
        "python -m pytest_duplexact.bridges.flm_audio --checkpoint DIR --workaround all "
        "--port 8765 --host 0.0.0.0")


def test_bridged_names_check_their_options_without_connecting():
    with pytest.raises(ModelConfigError, match="voila: no server. Start python -m "
                                               "pytest_duplexact.bridges.voila --voila-repo"):
        preflight("voila")
    preflight("voila", url="ws://127.0.0.1:1")  # nothing is contacted
    with pytest.raises(ModelConfigError, match="flm-audio: could not connect"):
        resolve_model("flm-audio", url="ws://127.0.0.1:1", connect_timeout="2")
