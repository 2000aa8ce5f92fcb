"""The package's import structure (docs/architecture.md): no module imports itself back through
a circle of module-level imports, and the plain data and the rules import no audio or I/O
library, so they stay pure, fast to import and testable without audio.

The graph is read statically (ast) from every module's top-level imports, the way Python runs
them when the module is first imported; imports inside functions (deferred on purpose, e.g.
``Clip.load``) and under ``TYPE_CHECKING`` are not edges. Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``, so a module depends on the packages of what it imports
(not on its own packages, which are already being imported when it runs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_duplexact

PACKAGE = Path(pytest_duplexact.__file__).resolve().parent
NAME = "pytest_duplexact"
# Libraries that read, write, decode or resample audio or run models on it. numpy is allowed in
# the data layer in principle, but none of it needs it today, so it is held to none either.
HEAVY = ("soundfile", "soxr", "torch", "numpy", "silero_vad", "faster_whisper", "openai",
         "matplotlib", "sphn")
# The floor that must stay pure: plain data (taxonomy, annotations, timeline, results, the
# recording type, the data package itself) and the rules.
PURE = ("data", "data.taxonomy", "data.annotations", "data.timeline", "data.results",
        "data.recording", "rules")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("suites", "fixtures") or "assets" in rel.parts:
            continue  # data shipped in the package (symlinked test suites, fixture sources)
        parts = [NAME, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _top_level(tree: ast.Module):
    """Import statements run at import time: module level, also inside try/if (but not
    ``if TYPE_CHECKING:``), never inside functions or classes."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if "TYPE_CHECKING" not in test:
                stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
            for h in node.handlers:
                stack.extend(h.body)
        elif isinstance(node, ast.With):
            stack.extend(node.body)


def _everywhere(tree: ast.Module):
    """Every import statement, deferred ones (inside functions) included."""
    return (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def _imports(name: str, path: Path, known: set[str],
             deferred: bool = False) -> tuple[set[str], set[str]]:
    """(package modules, outside top-level names) ``name`` imports at import time (with
    ``deferred``: anywhere in it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    inside, outside = set(), set()
    for node in (_everywhere if deferred else _top_level)(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        for t in targets:
            if t.split(".")[0] != NAME:
                outside.add(t.split(".")[0])
                continue
            parts = t.split(".")
            for k in range(1, len(parts) + 1):  # parent packages run first
                prefix = ".".join(parts[:k])
                # a module's own packages are already being imported when it runs
                if prefix in known and prefix != name and not name.startswith(prefix + "."):
                    inside.add(prefix)
    return inside, outside


def _graph(deferred: bool = False):
    mods = _modules()
    known = set(mods)
    graph, outside = {}, {}
    for name, path in mods.items():
        graph[name], outside[name] = _imports(name, path, known, deferred)
    return graph, outside


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _pure(name: str) -> bool:
    rest = name.split(".")[1:]
    return bool(rest) and (rest[0] == "rules" or ".".join(rest) in PURE)


def test_the_graph_sees_the_package():
    graph, outside = _graph()
    assert f"{NAME}.rules.stop" in graph and f"{NAME}.plugin" in graph
    # a known edge each way of reading: relative, absolute through a package
    assert f"{NAME}.rules.common" in graph[f"{NAME}.rules.stop"]
    assert "soundfile" in outside[f"{NAME}.data.audio"]


def test_no_import_circles():
    cycles = _cycles(_graph()[0])
    assert not cycles, "modules importing each other back at import time:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_no_circles_through_deferred_imports_either():
    """An import inside a function hides a circle from Python, not from the reader: the two
    modules still depend on each other."""
    cycles = _cycles(_graph(deferred=True)[0])
    assert not cycles, "modules depending on each other (deferred imports included):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_data_and_rules_import_nothing_heavy_statically():
    graph, outside = _graph()
    for name in graph:
        if not _pure(name):
            continue
        assert not (outside[name] & set(HEAVY)), (name, outside[name] & set(HEAVY))
        impure = {m for m in graph[name] if m != NAME and not _pure(m)}
        assert not impure, f"{name} imports {sorted(impure)}, above the data and rules floor"


@pytest.mark.parametrize("module", PURE)
def test_importing_the_floor_loads_no_audio_library(module):
    """The same, as Python actually runs it (also catches what the package __init__ pulls)."""
    code = (f"import sys, {NAME}.{module}; "
            f"print(' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=PACKAGE.parent)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", f"{module} loads {res.stdout.strip()}"
