"""The estimate uses what is known of how the model runs, and says what it assumed: a
bridge's kind from its server's READY, an import path's from its factory class, and an
import path it cannot tell streams at the run's concurrency (it ignored it: "19-31 min at
1x" at concurrency 4)."""

from __future__ import annotations

import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.pytest_plugin.spend import model_kind
from pytest_duplexact.rules import requires
from pytest_duplexact.run.settings import RunSettings
from pytest_duplexact.spend.cost import load_prices
from pytest_duplexact.spend.estimate import describe, plan
from tests.bridges.support import scripted_server


@pytest.fixture(scope="module")
def bundled():
    return load_dataset(bundled_root(), requires=requires).instances


def _head(bundled, spec: str, options: dict | None = None, concurrency: int = 4) -> str:
    kind, billed, basis = model_kind(spec, options)
    est = plan(bundled, RunSettings(model=spec), prices=load_prices(), kind=kind,
               kind_basis=basis, billed_model=billed, concurrency=concurrency)
    return describe(est)[0]


@pytest.mark.parametrize("mode", ["streaming", "stepped"])
def test_a_bridge_is_what_its_ready_says(bundled, mode):
    with scripted_server({"mode": mode}) as url:
        kind, _, basis = model_kind("bridge", {"url": url})
        head = _head(bundled, "bridge", {"url": url})
    assert kind == mode and basis == f"{mode}, as its server's READY says"
    assert "if it streams" not in head and f"({mode}, as its server's READY says)" in head
    if mode == "streaming":
        assert "ideal wall 5 min - 8 min at 4 in flight" in head, head
    else:
        assert "as fast as the model computes (stepped)" in head, head


def test_a_bridge_that_does_not_answer_says_so_and_hedges_at_the_concurrency(bundled):
    kind, _, basis = model_kind("bridge", {"url": "ws://127.0.0.1:9"})
    assert kind == "unknown" and basis.startswith("kind unknown: its server did not answer (")
    head = _head(bundled, "bridge", {"url": "ws://127.0.0.1:9"})
    assert "5 min - 8 min at 4 in flight if it streams, as fast as it computes if it steps" \
        in head, head


def test_an_import_path_class_says_its_kind_and_a_function_streams_at_the_concurrency(bundled):
    kind, billed, basis = model_kind("pytest_duplexact.models.providers.gpt_realtime:OpenAIRealtime")
    assert (kind, billed) == ("streaming", False)
    assert basis == "streaming, as OpenAIRealtime has an async connect"
    assert model_kind("pytest_duplexact.models.providers.silent:SilentModel")[0] == "stepped"
    kind, _, basis = model_kind("pytest_duplexact.models.providers.bridge:factory")
    assert kind == "unknown" and "known once it is built" in basis
    head = _head(bundled, "pytest_duplexact.models.providers.bridge:factory")
    # was "19 min - 31 min at 1x if it streams" at concurrency 4
    assert "wall: 5 min - 8 min at 4 in flight if it streams" in head, head
    assert "(kind unknown: an import path's is known once it is built)" in head
