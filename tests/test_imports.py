"""The package's import structure (docs/architecture.md): every import goes down the floors of
the table "The floors" in docs/architecture.md (read from the doc, so the doc cannot drift from
the code), no module imports itself back through a circle, and the plain data and the rules
import no audio or I/O library, so they stay pure, fast to import and testable without audio.

The graph is read statically (ast) from every module's top-level imports, the way Python runs
them when the module is first imported; imports inside functions (deferred on purpose, e.g.
``Clip.load``) and under ``TYPE_CHECKING`` are not edges. Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``, so a module depends on the packages of what it imports
(not on its own packages, which are already being imported when it runs). The floor check and
the second circle check read every import, deferred ones included; there a module that takes
a name its own package's ``__init__`` defines (``from . import Error``) depends on it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_duplexact

PACKAGE = Path(pytest_duplexact.__file__).resolve().parent
NAME = "pytest_duplexact"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
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
        if deferred and isinstance(node, ast.ImportFrom) and name.startswith(mod + ".") \
                and mod in known and any(f"{mod}.{a.name}" not in known for a in node.names):
            inside.add(mod)  # ``from . import Error``: a name its package's __init__ defines
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


Floors = list[tuple[float, tuple[str, ...]]]  # (floor, module prefixes) per row of the table


def _floor_table(markdown: str) -> Floors:
    """The rows of the table under "## The floors": (floor, modules named in the package
    column). ``cli/`` names the package ``pytest_duplexact.cli``, ``plugin.py`` the module."""
    section = markdown.split("\n## The floors\n", 1)[1].split("\n## ", 1)[0]
    rows: Floors = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"\d+(\.\d+)?", cells[0]):
            continue  # prose, the header, the |---| line
        paths = re.findall(r"`([^`]+)`", cells[1])
        assert paths and re.sub(r"`[^`]+`|[,\s]|and", "", cells[1]) == "", \
            f"the package cell of floor {cells[0]} names something other than paths: {cells[1]}"
        mods = []
        for p in paths:
            assert p.endswith(("/", ".py")), f"floor {cells[0]}: {p!r} is not a folder/ or a .py"
            mods.append(".".join([NAME, *p.removesuffix("/").removesuffix(".py").split("/")]))
        # a room inside a floor's package sits on a part floor (3.1: above 3, below 4)
        rows.append((float(cells[0]) if "." in cells[0] else int(cells[0]), tuple(mods)))
    assert rows, "no floor table under '## The floors'"
    return rows


def _row_of(module: str, floors: Floors) -> int | None:
    """The index of the row naming the longest prefix of ``module``, or None."""
    best, length = None, -1
    for i, (_, prefixes) in enumerate(floors):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > length:
                best, length = i, len(p)
    return best


def _floor_violations(graph: dict[str, set[str]], floors: Floors) -> list[tuple[str, str, str]]:
    """(importer, imported, why) for every edge that does not go down the floors: to a higher
    floor, or to another row of the same floor. The package root imports nothing and is
    imported by everything (parent packages run first), so it has no floor."""
    out = []
    for a in sorted(graph):
        if a == NAME:
            continue
        ra = _row_of(a, floors)
        for b in sorted(graph[a]):
            if b == NAME:
                continue
            rb = _row_of(b, floors)
            if ra is None or rb is None or ra == rb:
                continue  # unplaced modules fail test_every_module_has_a_floor
            fa, fb = floors[ra][0], floors[rb][0]
            if fb > fa:
                out.append((a, b, f"floor {fa} imports floor {fb}"))
            elif fb == fa:
                out.append((a, b, f"floor {fa} imports another row of its own floor"))
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


@pytest.fixture(scope="module")
def floors() -> Floors:
    return _floor_table(ARCHITECTURE.read_text(encoding="utf-8"))


def test_every_module_has_a_floor(floors):
    named = [p for _, prefixes in floors for p in prefixes]
    mods = set(_modules())
    assert not [p for p in named if p not in mods], "the floor table names what is not there"
    unplaced = sorted(m for m in mods if m != NAME and _row_of(m, floors) is None)
    assert not unplaced, f"modules in no row of docs/architecture.md's floor table: {unplaced}"


def test_imports_go_down_the_floors(floors):
    """docs/architecture.md's table is the rule, deferred imports included: a function-level
    import of a higher floor still makes the lower floor depend on it."""
    bad = _floor_violations(_graph(deferred=True)[0], floors)
    assert not bad, "imports against the floors (docs/architecture.md):\n" + "\n".join(
        f"{a} -> {b}: {why}" for a, b, why in bad)


SYNTHETIC = """# x

## The floors

Prose with a `code/` span that is not a row.

| floor | package | what lives there |
| --- | --- | --- |
| 2 | `top/`, `entry.py` | the top |
| 1 | `mid/` | the middle, `not/a/row/` here |
| 1 | `side/` | beside the middle |
| 0 | `low/` | the bottom |
| 3 | `low/lifted.py` | one module of low/ that sits above the rest and top/ |
| 1.5 | `mid/upper/` | a storey of the middle floor, above it |

## Next section

| 9 | `ignored/` | another table |
"""


def test_the_floor_table_is_read_from_the_markdown():
    rows = _floor_table(SYNTHETIC)
    assert rows == [(2, (f"{NAME}.top", f"{NAME}.entry")), (1, (f"{NAME}.mid",)),
                    (1, (f"{NAME}.side",)), (0, (f"{NAME}.low",)), (3, (f"{NAME}.low.lifted",)),
                    (1.5, (f"{NAME}.mid.upper",))]
    assert _row_of(f"{NAME}.low.lifted", rows) == 4  # the longest path wins
    assert _row_of(f"{NAME}.low.other", rows) == 3
    assert _row_of(f"{NAME}.lowly", rows) is None  # a prefix of the name is not a package
    with pytest.raises(AssertionError, match="other than paths"):
        _floor_table(SYNTHETIC.replace("| 0 | `low/` |", "| 0 | `low/` (mostly) |"))


def test_the_floor_check_finds_a_violation():
    """A synthetic graph: each kind of edge the check must refuse, and those it must allow."""
    rows = _floor_table(SYNTHETIC)
    p = f"{NAME}."
    graph = {p + "top.a": {p + "mid.b", p + "low", p + "entry", NAME},  # down, own row: fine
             p + "mid.b": {p + "top.a"},                 # up a floor
             p + "side.c": {p + "mid.b"},                # sideways on floor 1
             p + "low.d": {p + "low.e", p + "side.c"},   # own row fine; up to floor 1 not
             p + "low.lifted": {p + "low.e", p + "top.a"},  # lifted above top/: fine
             p + "low.e": {p + "low.lifted"},            # its own package, but floor 3
             p + "mid.upper.f": {p + "mid.b"},           # a storey above its floor: fine
             p + "mid.g": {p + "mid.upper.f"},           # up a storey
             NAME: set()}
    assert _floor_violations(graph, rows) == [
        (p + "low.d", p + "side.c", "floor 0 imports floor 1"),
        (p + "low.e", p + "low.lifted", "floor 0 imports floor 3"),
        (p + "mid.b", p + "top.a", "floor 1 imports floor 2"),
        (p + "mid.g", p + "mid.upper.f", "floor 1 imports floor 1.5"),
        (p + "side.c", p + "mid.b", "floor 1 imports another row of its own floor"),
    ]


def test_a_child_taking_a_name_from_its_packages_init_depends_on_it(tmp_path):
    """The circle ReleasedDataError made: released/__init__ imported its children lazily, and
    they imported the error back from it."""
    known = {f"{NAME}.pkg", f"{NAME}.pkg.child", f"{NAME}.pkg.other"}
    child = tmp_path / "child.py"
    child.write_text("from . import Error, other\n", encoding="utf-8")
    assert _imports(f"{NAME}.pkg.child", child, known, deferred=True)[0] == \
        {f"{NAME}.pkg", f"{NAME}.pkg.other"}
    assert _imports(f"{NAME}.pkg.child", child, known)[0] == {f"{NAME}.pkg.other"}
    child.write_text("from . import other\n", encoding="utf-8")  # a submodule: no edge
    assert _imports(f"{NAME}.pkg.child", child, known, deferred=True)[0] == {f"{NAME}.pkg.other"}


def test_the_plain_types_are_imported_from_their_home():
    """data.instance re-exports Instance, Clip and Annotations for users; inside the package
    each is imported from where it is defined (data.annotations), so a reader finds it."""
    home = {"Instance", "Clip", "Annotations", "Requirements"}
    bad = []
    for name, path in _modules().items():
        if name == f"{NAME}.data.instance":
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module) if p)
            taken = {a.name for a in node.names} & home
            if target == f"{NAME}.data.instance" and taken:
                bad.append(f"{name}: {sorted(taken)} from data.instance")
    assert not bad, "import these from data.annotations:\n" + "\n".join(bad)


def test_a_part_floor_sits_between_two_floors():
    """models/'s rooms: a decimal floor is above the whole floors below it and below the
    next one; its rows go down among themselves like any other."""
    rows = _floor_table(SYNTHETIC.replace(
        "| 0 | `low/` | the bottom |",
        "| 1.2 | `mid/up/` | a room of mid/ |\n| 1.1 | `mid/down/` | below it |\n"
        "| 0 | `low/` | the bottom |"))
    p = f"{NAME}."
    graph = {p + "mid.up.a": {p + "mid.down.b", p + "low"},  # down within mid/: fine
             p + "mid.down.b": {p + "mid.up.a"},             # up a part floor
             p + "top.c": {p + "mid.up.a"},                  # floor 2 over 1.2: fine
             p + "mid.d": {p + "mid.up.a"},                  # floor 1 under its room 1.2
             NAME: set()}
    assert _floor_violations(graph, rows) == [
        (p + "mid.d", p + "mid.up.a", "floor 1 imports floor 1.2"),
        (p + "mid.down.b", p + "mid.up.a", "floor 1.1 imports floor 1.2"),
    ]
