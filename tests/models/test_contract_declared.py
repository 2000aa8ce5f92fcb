"""The declared contract: a model's optional declarations are ``contract.DuplexModel``'s, with
their defaults, and a plain class declaring the same is read the same way (``traits``); the
bridge kit's are ``BridgeModel``'s. Nothing in the package probes a model, a factory or a
session by name for them, and no hook is set on a function."""

from __future__ import annotations

import ast
import asyncio
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import pytest_duplexact
from pytest_duplexact.bridges import kit
from pytest_duplexact.bridges.kit import BridgeModel, BridgeServer
from pytest_duplexact.models import (
    adapter,
    contract,
    is_stepped,
    resolve_model,
    streaming_contract,
)
from pytest_duplexact.models.adapter import traits
from pytest_duplexact.models.contract import DuplexModel, StepOutput
from pytest_duplexact.models.slots import PerSlotBatch

PACKAGE = Path(pytest_duplexact.__file__).resolve().parent
PIPELINES = ("direct", "simulator", "barge_in")


# --- a plain model and a DuplexModel read alike ----------------------------------------------

class _Declares:
    name = "turns"
    pipelines = ("direct",)
    max_concurrency = 2
    retries_transient = True
    chunk_ms = 40.0
    sample_rate, frame_size = 16_000, 320

    def start(self, info):
        pass

    def step(self, frame):
        return frame

    def finish(self):
        pass


class PlainModel(_Declares):
    """Derives from nothing of ours: the documented contract."""


class DeclaredModel(_Declares, DuplexModel):
    pass


def test_a_plain_model_and_a_duplex_model_declaring_the_same_have_equal_traits():
    plain, declared = traits(PlainModel()), traits(DeclaredModel())
    assert plain == declared
    assert (declared.name, declared.pipelines, declared.max_concurrency,
            declared.retries_transient, declared.chunk_ms) == ("turns", ("direct",), 2, True, 40.0)
    for pipeline in PIPELINES:
        assert plain.why_unsupported(pipeline) == declared.why_unsupported(pipeline)
    assert declared.why_unsupported("simulator") == (
        "unsupported by this model: turns runs only on direct replay, not simulator")


def test_a_users_plain_class_resolves_without_a_warning(monkeypatch, tmp_path):
    """``--duplexact-model=mypkg.model:Model``: the documented plain class, no base of ours."""
    (tmp_path / "user_plain_model.py").write_text(
        "import numpy as np\n"
        "class Model:\n"
        "    name, pipelines, sample_rate, frame_size = 'mine', ('direct',), 16000, 320\n"
        "    def start(self, info): pass\n"
        "    def step(self, frame): return np.zeros(320, np.float32)\n"
        "    def finish(self): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = resolve_model("user_plain_model:Model")
    assert not isinstance(model, DuplexModel) and is_stepped(model)
    assert traits(model).why_unsupported("barge_in") == (
        "unsupported by this model: mine runs only on direct replay, not barge_in")


def test_every_default_of_a_duplex_model():
    assert (DuplexModel.name, DuplexModel.pipelines, DuplexModel.max_concurrency,
            DuplexModel.retries_transient, DuplexModel.slots_reset_alone,
            DuplexModel.chunk_ms) == ("", None, None, False, False, None)
    assert DuplexModel().unsupported("simulator") is None

    plain = traits(type("BareDeclared", (), {})())  # the same class name, deriving from nothing

    class BareDeclared(DuplexModel):
        pass

    declared = traits(BareDeclared())
    assert plain == declared
    assert (declared.name, declared.pipelines, declared.max_concurrency, declared.batched,
            declared.recorded, declared.retries_transient, declared.async_connect,
            declared.steps, declared.sample_rate, declared.frame_size, declared.step_many,
            declared.slots_reset_alone, declared.chunk_ms) == \
        ("BareDeclared", None, None, False, False, False, False, False, None, None, None, False,
         None)
    assert all(declared.why_unsupported(p) is None for p in PIPELINES)


def test_a_per_slot_batch_resets_its_slots_alone_whichever_base_comes_first():
    class Silentish(DuplexModel):
        sample_rate, frame_size = 16_000, 320

        def step(self, frame):
            return StepOutput(frame)

    class Batched(Silentish, PerSlotBatch):
        pass

    t = traits(Batched())
    assert t.batched and t.slots_reset_alone


def test_a_model_says_why_itself_over_its_pipelines():
    class SaysWhy(DuplexModel):
        pipelines = ("direct",)

        def unsupported(self, pipeline):
            return None if pipeline != "barge_in" else "no barge-in on this deployment"

    t = traits(SaysWhy())
    assert t.why_unsupported("simulator") is None
    assert t.why_unsupported("barge_in") == "no barge-in on this deployment"


def test_a_method_set_to_none_is_not_declared():
    class NoSteps(PlainModel):
        step = None
        step_many = None

    t = traits(NoSteps())
    assert not t.steps and t.step_many is None


def test_a_class_is_read_for_its_kind_unbuilt():
    class Streams(DuplexModel):
        async def connect(self, info):
            return None

    assert traits(Streams).async_connect and not traits(Streams).steps
    assert traits(PlainModel).steps and not traits(PlainModel).async_connect


def test_step_many_set_on_the_instance_counts():
    m = PlainModel()
    m.step_many = lambda frames: np.asarray(frames)
    assert traits(m).step_many is m.step_many


# --- the bridge kit -----------------------------------------------------------------------

class _BridgeDeclares:
    name, mode, sample_rate, frame, transcript = "echo", "stepped", 16_000, 320, True

    def open(self, options, trial):
        raise AssertionError("not opened here")


class PlainBridge(_BridgeDeclares):
    pass


class DeclaredBridge(_BridgeDeclares, BridgeModel):
    pass


def _ready(model, **kw):
    return BridgeServer(model, **kw).ready


def test_a_plain_bridge_model_and_a_bridge_model_say_the_same_ready():
    assert _ready(PlainBridge()) == _ready(DeclaredBridge())
    assert _ready(PlainBridge()).max_sessions == 1

    class Bare(BridgeModel):
        mode, sample_rate, frame = "stepped", 16_000, 320

    class BarePlain:
        mode, sample_rate, frame = "stepped", 16_000, 320

    bare, plain = _ready(Bare()), _ready(BarePlain())
    assert (bare.transcript, bare.model, bare.max_sessions) == (False, "Bare", 1)
    assert (plain.transcript, plain.model, plain.max_sessions) == (False, "BarePlain", 1)


def test_every_default_of_a_bridge_model():
    assert (BridgeModel.name, BridgeModel.transcript, BridgeModel.max_sessions,
            BridgeModel.warmup) == ("", False, None, None)
    assert BridgeModel().close() is None
    assert kit.own_max_sessions(DeclaredBridge()) is None  # no cap: --max-sessions may ask more
    assert not isinstance(DeclaredBridge(), kit.WarmingUp)  # no warm-up to time
    assert not kit.batched(DeclaredBridge()) and not kit.batched(PlainBridge())


def test_a_bridge_models_warm_up_and_step_batch_are_found_on_both():
    warmed = []

    class Warm(DeclaredBridge):
        max_sessions = 3

        def warmup(self):
            warmed.append(True)

        def step_batch(self, steps):
            return [s.step(f) for s, f in steps]

    server = BridgeServer(Warm())
    asyncio.run(server._warm_up())
    server.stepper.shutdown()
    assert warmed == [True] and server.warmup_s is not None
    assert kit.batched(Warm()) and server.ready.max_sessions == 3


# --- nothing probes by name, no hook on a function ------------------------------------------

# The objects of our contracts, as the package names them: a model (``model``, ``self.model``,
# ``self._model``, ``m``), a factory (``factory``, or ``factory_for(...)`` itself), a session.
OBJECTS = {"model", "factory", "session", "m"}
FINDERS = {"factory_for", "adapter_for", "resolve_model"}
HOOKS = {"preflight", "reach", "probe"}


def _contract_names() -> set[str]:
    """Every member of the declared contracts: ``DuplexModel``'s and its protocols', the
    streaming session's, a factory's hooks, ``BridgeModel``'s and the kit's protocols."""
    names = set(HOOKS)
    for module in (contract, streaming_contract, adapter, kit):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            if cls in (DuplexModel, BridgeModel) or getattr(cls, "_is_protocol", False):
                names |= {n for n in (*vars(cls), *cls.__dict__.get("__annotations__", {}))
                          if not n.startswith("_")}
    return names


def _object(node: ast.AST) -> str:
    """What a probe's first argument names: ``model`` for ``model``, ``self.model`` and
    ``self._model``; ``factory_for`` for ``factory_for(name)``."""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""
    return name.lstrip("_")


def probes_in(source: str, contract_names: set[str]) -> list[str]:
    """``getattr``/``hasattr`` calls that read a contract's declaration from a model, a factory
    or a session by name: the object is one of ``OBJECTS`` (or what ``FINDERS`` return) and
    the attribute is a member of a declared contract, or computed (a loop over names). Other
    attributes of an object so named are not ours to declare (an open model's own network:
    ``getattr(model, "device", "cpu")`` in a bridge), nor is any other object (an argparse
    namespace, ``torch``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        obj, attr = _object(node.args[0]), node.args[1]
        if obj not in OBJECTS | FINDERS:
            continue
        if not isinstance(attr, ast.Constant) or attr.value in contract_names:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def hooks_set_in(source: str) -> list[str]:
    """``factory.preflight = check`` and its kind: a hook assigned onto a function or any
    object but ``self`` (a factory's hooks are ``Adapter`` arguments)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in HOOKS \
                    and not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                found.append(f"{node.lineno}: {ast.unparse(t)}")
    return found


def _package_files():
    return [p for p in PACKAGE.rglob("*.py")
            if p.parts[len(PACKAGE.parts)] not in ("suites", "fixtures")]


@pytest.mark.parametrize("source, found", [
    ("getattr(model, 'pipelines', None)", True),
    ("hasattr(self.model, 'step_batch')", True),
    ("getattr(self._session, 'usage', None)", True),
    ("getattr(factory_for(name), 'reach', None)", True),
    ("[getattr(model, n, None) for n in names]", True),
    ("getattr(factory, '__name__', 'f')", False),
    ("getattr(model, 'device', 'cpu')", False),
    ("getattr(args, 'pipelines', None)", False),
    ("getattr(torch, dtype)", False),
])
def test_the_probe_rule(source, found):
    assert bool(probes_in(source, _contract_names())) is found


def test_the_hook_rule():
    assert hooks_set_in("factory.preflight = check")
    assert hooks_set_in("build.probe: Hook = probe")
    assert not hooks_set_in("self.probe = probe") and not hooks_set_in("x.other = 1")


def test_no_declaration_is_probed_by_name_in_the_package():
    names = _contract_names()
    assert {"pipelines", "unsupported", "step_batch", "max_sessions", "warmup", "usage",
            "attach_playback", "preflight", "recording_for"} <= names
    found = [f"{p.relative_to(PACKAGE)}:{hit}" for p in _package_files()
             for hit in probes_in(p.read_text(encoding="utf-8"), names)]
    assert not found, found


def test_no_hook_is_set_on_a_function_in_the_package():
    found = [f"{p.relative_to(PACKAGE)}:{hit}" for p in _package_files()
             for hit in hooks_set_in(p.read_text(encoding="utf-8"))]
    assert not found, found
