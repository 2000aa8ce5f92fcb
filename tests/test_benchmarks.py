"""The benchmarks' import convention, read from their source: each runs from the repository
root as ``python -m benchmarks.<name>``, so none edits ``sys.path``, none imports a sibling
by its bare name (``benchmarks.<name>`` instead), and none imports a test module
(``test_*.py``): what a benchmark shares with the tests lives in the fakes (tests/fakes) or
the kit (tests/support)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
LOADERS = ("import_module", "spec_from_file_location", "run_path", "load_module")


def problems(source: str, siblings: set[str]) -> list[str]:
    """What breaks the convention in one file's source, as ``line: what`` strings."""
    found = []
    for node in ast.walk(ast.parse(source)):
        where = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr == "path" \
                and isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append(f"{where}: sys.path")
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(f"{where}: a relative import (run as a module: benchmarks.<name>)")
        tests = [n for n in names if any(part.startswith("test_") for part in n.split("."))]
        if tests:
            found.append(f"{where}: imports the test module {tests[0]}")
        if names and names[0].split(".")[0] in siblings:
            found.append(f"{where}: imports {names[0]} by its bare name "
                         f"(benchmarks.{names[0]})")
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in LOADERS:
                found.append(f"{where}: loads a module by path or name ({called})")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_no_benchmark_edits_sys_path_or_imports_a_test_module():
    siblings = {p.stem for p in BENCHMARKS.glob("*.py")} - {"__init__"}
    found = {p.name: problems(p.read_text(encoding="utf-8"), siblings)
             for p in sorted(BENCHMARKS.glob("*.py"))}
    assert {name: f for name, f in found.items() if f} == {}
    assert (BENCHMARKS / "__init__.py").is_file()  # python -m benchmarks.<name>


def test_the_check_sees_each_way_round_the_convention():
    source = """
import sys
sys.path.insert(0, "..")
from tests.realtime.test_open_servers import played_end
from tests.realtime import test_open_servers
from _common import ROOT
from . import harness
spec = importlib.util.spec_from_file_location("x", "tests/fakes/x.py")
"""
    assert [p.split(": ")[1].split(" ")[0] for p in problems(source, {"_common"})] == [
        "sys.path", "imports", "imports", "imports", "a", "loads"]
    allowed = """
from benchmarks._common import ROOT
from tests.support.servers import child
from tests.fakes import FakeOpenAI
from tests.realtime import realtime_support
"""
    assert problems(allowed, {"_common"}) == []
