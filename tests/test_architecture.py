"""The shape of the package (docs/architecture.md): no import cycle between modules, no
hand-written module over the size limit, and the layer contracts of ``[tool.importlinter]``.

The allow-lists below name what is known to break a rule today, each entry with the work
that removes it; an entry that no longer matches anything fails the test too, so the lists
only ever shrink.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "memstrata"
MAX_LINES = 600

# Imports left out of the cycle check (importer, imported), each with the work that
# removes it. Empty: keep it so.
CYCLE_ALLOWED: frozenset[tuple[str, str]] = frozenset()

# Hand-written modules allowed over MAX_LINES, each with the split that will bring it
# under. Empty: keep it so.
SIZE_ALLOWED: frozenset[str] = frozenset()


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def one_cycle(edges: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, for the failure message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    return [*paths[node], start]
                if nxt in members and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies (the same rule as
    # ``exclude_type_checking_imports`` in the import contracts).
    return grimp.build_graph("memstrata", cache_dir=None, exclude_type_checking_imports=True)


def import_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_the_cycle_finder_reports_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(edges) == [["a", "b", "c"]]
    assert one_cycle(edges, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    edges = import_edges(graph)
    stale = sorted(pair for pair in CYCLE_ALLOWED if pair[1] not in edges.get(pair[0], ()))
    assert not stale, f"allowed imports that no longer exist, remove them: {stale}"
    for importer, imported in CYCLE_ALLOWED:
        edges[importer].discard(imported)
    cycles = [" -> ".join(one_cycle(edges, c)) for c in strongly_connected(edges)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def enclosing(module: str) -> list[str]:
    """The packages around ``module``, outermost first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def with_package_inits(edges: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """``edges`` plus what Python runs on each import: importing ``a.b.c`` runs the
    ``__init__`` of ``a`` and ``a.b`` first. Packages around the importer itself are left
    out (they have begun loading before it runs: a package importing its own parts is no
    cycle); the root encloses every module, and has its own test below."""
    out = {m: set(targets) for m, targets in edges.items()}
    for importer, targets in edges.items():
        around = {*enclosing(importer), importer}
        for target in targets:
            out[importer].update(p for p in enclosing(target) if p not in around)
    return out


def test_package_inits_join_the_cycle_check() -> None:
    edges = {
        "m.a": set(),
        "m.a.x": {"m.b.y"},  # runs m.b's __init__ first ...
        "m.b": {"m.b.z"},
        "m.b.y": set(),
        "m.b.z": {"m.a.x"},  # ... which reaches back into m.a
    }
    assert strongly_connected(edges) == []
    assert strongly_connected(with_package_inits(edges)) == [["m.a.x", "m.b", "m.b.z"]]
    # A package importing its own parts is how packages are built, not a cycle.
    assert strongly_connected(with_package_inits({"m.c": {"m.c.x"}, "m.c.x": {"m.c.y"}})) == []


def test_no_import_cycle_through_a_package_init(graph: grimp.ImportGraph) -> None:
    edges = with_package_inits(import_edges(graph))
    cycles = [" -> ".join(one_cycle(edges, c)) for c in strongly_connected(edges)]
    assert not cycles, "import cycles through package __init__ modules:\n" + "\n".join(cycles)


def test_the_root_package_imports_the_kernel_only(graph: grimp.ImportGraph) -> None:
    # Every module runs memstrata/__init__.py first: anything it imported beyond the
    # kernel would sit below every module and above most (the facade, before it was
    # imported lazily), and `import memstrata.client` would load the local stack.
    kernel = {
        "memstrata.encoding",
        "memstrata.errors",
        "memstrata.ids",
        "memstrata.instants",  # a Message's datetimes, built from stored microseconds
        "memstrata.types",
        "memstrata.version",
    }
    loaded = graph.find_upstream_modules("memstrata")
    assert "memstrata.types" in loaded
    assert loaded <= kernel, f"memstrata/__init__.py loads more than the kernel: {loaded - kernel}"


def hand_written_modules() -> dict[str, int]:
    sizes = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.startswith('"""Generated from'):  # scripts/unasync.py's output
            continue
        sizes[path.relative_to(SRC).as_posix()] = len(text.splitlines())
    return sizes


def test_no_module_over_the_size_limit() -> None:
    sizes = hand_written_modules()
    assert "api/_async.py" in sizes
    assert "api/_sync.py" not in sizes  # generated: the limit is its source's
    stale = sorted(p for p in SIZE_ALLOWED if sizes.get(p, 0) <= MAX_LINES)
    assert not stale, f"allowed modules now within {MAX_LINES} lines, remove them: {stale}"
    over = {p: n for p, n in sizes.items() if n > MAX_LINES and p not in SIZE_ALLOWED}
    assert not over, f"modules over {MAX_LINES} lines, split them: {over}"


def test_import_contracts_kept() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    assert code == 0, out.getvalue()
