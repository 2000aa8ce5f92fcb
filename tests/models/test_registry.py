"""resolve_model: built-ins, import paths, entry points, recorded:DIR, clear errors."""

import sys
from importlib.metadata import EntryPoint

import pytest

import pytest_duplexact.models as models
from pytest_duplexact.models import (
    BUILTINS,
    ENTRY_POINT_GROUP,
    UnknownModel,
    is_recorded,
    is_stepped,
    resolve_model,
)
from pytest_duplexact.models.providers.endpoint import EndpointModel
from pytest_duplexact.models.providers.oracle import OracleModel
from pytest_duplexact.models.providers.silent import SilentModel
from tests.pipelines.helpers import ScriptedModel


@pytest.mark.parametrize("name,cls", [("silent", SilentModel), ("oracle", OracleModel),
                                      ("endpoint", EndpointModel)])
def test_builtins(name, cls):
    m = resolve_model(name)
    assert isinstance(m, cls) and is_stepped(m) and m.name == name


def test_import_path_with_options():
    m = resolve_model("tests.pipelines.helpers:ScriptedModel", sample_rate=24_000, frame_size=1920)
    assert isinstance(m, ScriptedModel) and (m.sample_rate, m.frame_size) == (24_000, 1920)


def test_entry_point(monkeypatch):
    ep = EntryPoint("my-model", "tests.pipelines.helpers:ScriptedModel", ENTRY_POINT_GROUP)
    monkeypatch.setattr(models, "entry_points",
                        lambda group: [ep] if group == ENTRY_POINT_GROUP else [])
    assert isinstance(resolve_model("my-model"), ScriptedModel)
    assert "my-model" in models.registered_names()


def test_unknown_name_lists_the_builtins():
    with pytest.raises(UnknownModel) as e:
        resolve_model("moshi-9000")
    msg = str(e.value)
    assert "moshi-9000" in msg and all(name in msg for name in BUILTINS)
    assert "recorded:DIR" in msg and "package.module:factory" in msg


def test_bad_import_paths():
    with pytest.raises(UnknownModel, match="cannot import module 'no_such_pkg.mod'"):
        resolve_model("no_such_pkg.mod:factory")
    with pytest.raises(UnknownModel, match="has no attribute 'Nope'"):
        resolve_model("tests.pipelines.helpers:Nope")


def test_factory_returning_something_else_is_rejected():
    with pytest.raises(TypeError, match="neither a SteppedModel"):
        resolve_model("tests.support.builders:spread", text="a b", start=0.0, end=1.0)


def test_recorded_prefix(tmp_path):
    m = resolve_model(f"recorded:{tmp_path}")
    assert is_recorded(m) and not is_stepped(m)
    with pytest.raises(ValueError, match="no such folder"):
        resolve_model(f"recorded:{tmp_path / 'missing'}")


def test_gpt_realtime_is_imported_only_when_asked_for():
    sys.modules.pop("pytest_duplexact.models.providers.gpt_realtime", None)
    resolve_model("silent")
    assert "pytest_duplexact.models.providers.gpt_realtime" not in sys.modules
    assert BUILTINS["gpt-realtime"].factory == "pytest_duplexact.models.providers.gpt_realtime:factory"


def test_is_stepped_rejects_classes():
    assert not is_stepped(SilentModel) and is_stepped(SilentModel())


class _Checked:
    calls: list = []

    def __init__(self, level="1"):
        raise AssertionError("preflight must not build the model")

    @classmethod
    def preflight(cls, **options):
        cls.calls.append(options)
        if options.get("level") == "bad":
            raise ValueError("level must be a number")


def test_preflight_checks_without_building(tmp_path):
    spec = f"{__name__}:_Checked"
    models.preflight(spec, level="2")
    assert _Checked.calls == [{"level": "2"}]
    with pytest.raises(ValueError, match="level must be a number"):
        models.preflight(spec, level="bad")
    with pytest.raises(ValueError, match=r"does not accept these options \(colour\).*"
                       r"its factory takes _Checked\(level"):
        models.preflight(spec, colour="red")
    with pytest.raises(UnknownModel, match="Known: silent, oracle, endpoint"):
        models.preflight("nope")
    models.preflight("oracle")
    models.preflight(f"recorded:{tmp_path}")
    with pytest.raises(ValueError, match="no such folder; point recorded: at the run"):
        models.preflight(f"recorded:{tmp_path / 'gone'}")
    (tmp_path / "afile").write_text("x")  # it said "no such folder" of a file too
    with pytest.raises(ValueError, match="afile: a file, not a folder; point recorded:"):
        models.preflight(f"recorded:{tmp_path / 'afile'}")
