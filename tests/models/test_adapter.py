"""The adapter contract (models/adapter.py): hooks with defaults on every factory, a user's
plain factory wrapped at the registry's boundary, one reader of a model's optional
declarations (tests/models/test_contract_declared.py: the declarations themselves, and no probe
by name), and no function attribute in the package."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import pytest_duplexact
from pytest_duplexact.models import BUILTINS, factory_for, preflight, probe
from pytest_duplexact.models.adapter import Adapter, adapter_for, traits
from pytest_duplexact.models.contract import Probed
from pytest_duplexact.models.model_options import ModelConfigError, coerce, value_problem

PACKAGE = Path(pytest_duplexact.__file__).resolve().parent


def _package_files():
    return [p for p in PACKAGE.rglob("*.py")
            if "assets" not in p.parts and p.parts[len(PACKAGE.parts)] not in ("suites",
                                                                              "fixtures")]


def test_no_function_attributes_in_the_package():
    """``factory.preflight = preflight``: a hook is an ``Adapter`` argument, not an attribute
    set on a function."""
    found = []
    for path in _package_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {n.name for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id in functions:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(t)}")
    assert not found, found


def test_every_network_builtin_is_an_adapter():
    """Every built-in with a server or a key has its hooks as methods: the registry calls
    them on all alike."""
    for name, row in BUILTINS.items():
        if row.kind == "stepped" and not row.env:
            continue  # an in-process model (silent, oracle, ...): a class may do, wrapped at
            # the boundary like a user's
        assert isinstance(factory_for(name), Adapter), name


def test_an_adapter_defaults_to_nothing_to_check_and_nothing_to_reach():
    a = Adapter(lambda x=1: ("built", x))
    assert a(x=2) == ("built", 2)
    assert a.preflight(x=2) is None and a.probe(x=2) is None and a.reach(x=2) is None


def test_reach_and_probe_answer_for_each_other():
    only_reach = Adapter(lambda: None, reach=lambda **o: "a server")
    assert only_reach.probe() == Probed("a server")
    only_probe = Adapter(lambda: None, probe=lambda **o: Probed("served", model="m"))
    assert only_probe.reach() == "served"


def test_a_plain_factory_keeps_the_hooks_it_declares():
    """docs/models.md: a user's ``factory.preflight`` (or a classmethod) still runs."""
    calls = []

    def factory(checkpoint: str = ""):
        return object()

    def check(**options):
        calls.append(options)

    factory.preflight = check  # a user's factory, as docs/models.md shows it
    wrapped = adapter_for(factory)
    wrapped.preflight(checkpoint="c")
    assert calls == [{"checkpoint": "c"}] and wrapped.__name__ == "factory"

    class Model:
        @classmethod
        def preflight(cls, **options):
            raise ModelConfigError("no checkpoint")

    with pytest.raises(ModelConfigError, match="no checkpoint"):
        adapter_for(Model).preflight()
    assert adapter_for(wrapped) is wrapped


def test_the_registry_runs_a_user_factorys_preflight_and_probe(monkeypatch, tmp_path):
    mod = tmp_path / "user_model_hooks.py"
    mod.write_text("from pytest_duplexact.models.contract import Probed\n"
                   "def factory(url: str = ''):\n    raise AssertionError('not built')\n"
                   "def check(url=''):\n    if not url: raise ValueError('no url')\n"
                   "factory.preflight = check\n"
                   "factory.probe = lambda url='': Probed('answered ' + url)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="no url"):
        preflight("user_model_hooks:factory")
    assert probe("user_model_hooks:factory", url="u").description == "answered u"


def test_traits_default_for_a_plain_model():
    class Plain:
        sample_rate, frame_size = 16000, 320

        def step(self, frame):
            return frame

    t = traits(Plain())
    assert (t.name, t.pipelines, t.unsupported, t.max_concurrency, t.batched, t.recorded,
            t.retries_transient, t.step_many, t.chunk_ms) == \
        ("Plain", None, None, None, False, False, False, None, None)
    assert t.steps and not t.async_connect and t.why_unsupported("simulator") is None


def test_traits_read_what_a_model_declares():
    class DirectOnly:
        name, pipelines, max_concurrency = "turns", ("direct",), 1

    t = traits(DirectOnly())
    assert t.max_concurrency == 1
    assert t.why_unsupported("simulator") == ("unsupported by this model: turns runs only on "
                                              "direct replay, not simulator")

    class SaysWhy:
        def unsupported(self, pipeline):
            return f"no {pipeline}"

    assert traits(SaysWhy()).why_unsupported("bargein") == "no bargein"


@dataclasses.dataclass
class _Opts:
    n: int = 1
    rate: float = 1.0
    on: bool = False
    url: str | None = ""


def test_one_coercer_for_dataclass_options_and_factory_signatures():
    fields = {f.name: f for f in dataclasses.fields(_Opts)}
    assert coerce("m", fields["n"], "3") == 3 and coerce("m", fields["rate"], "2") == 2.0
    assert coerce("m", fields["on"], "yes") is True and coerce("m", fields["url"], "none") \
        is None
    with pytest.raises(ModelConfigError, match="option n: expected int, got 'x'"):
        coerce("m", fields["n"], "x")
    # the registry's reading of a user's signature is the same one
    assert value_problem("int | None", None, "x") == "an integer"
    assert value_problem("float | str", 0.7, "fast") == "a number"
    assert value_problem(inspect.Parameter.empty, 0.7, "fast") == "a number"
    assert value_problem("Path | None", None, "x") is None  # a type of its own: not ours
