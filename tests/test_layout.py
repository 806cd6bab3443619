"""The package follows the data flow: measure -> sources -> analysis -> book, each importing only from the stages
before it (lazy imports inside functions included), and reading published data or running the findings never
imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "circuitdev"
STAGES = ["measure", "sources", "analysis", "book"]
BASICS = {"errors", "schema", "paths", "atomic", "runinfo", "locks"}  # locks: one advisory lock per written folder


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "circuitdev" or len(parts) < 2:
        return None
    return parts[1]


def imports_of(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names if node.module == "circuitdev"}
    return {m for m in out if m.startswith("circuitdev")}


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_no_module_imports_from_a_later_stage(path):
    here = path.relative_to(LIB).parts[0].removesuffix(".py")
    for module in imports_of(path):
        there = stage_of(module)
        if here in BASICS:
            assert there in BASICS or there is None, f"{path.name}: a basic module imports {module}"
        elif here in STAGES and there in STAGES:
            assert STAGES.index(there) <= STAGES.index(here), f"{path}: {here} imports the later stage {module}"
        if here in STAGES[:3]:
            assert there not in ("commands", "cli", "workshop"), f"{path}: imports {module}"


def test_published_data_and_findings_never_import_torch():
    code = ("import sys\nimport circuitdev.sources.published, circuitdev.sources.store, circuitdev.sources.fetch\n"
            "import circuitdev.analysis.findings, circuitdev.analysis.audit\n"
            "import circuitdev.analysis.reanalysis, circuitdev.book.chapter, circuitdev.book.plots\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# what each module directly in lib/circuitdev may import from the package: the basics only basics; the doctor (the
# environment checks) basics too -- no stage, no toy, no workshop: the commands compose its checks with the workshop's
TOP_LEVEL_MAY_IMPORT = {**{b: BASICS for b in BASICS}, "doctor": BASICS, "cli": BASICS | {"commands"}}


def test_top_level_modules_import_only_what_they_may():
    tops = sorted(p for p in LIB.glob("*.py") if p.name != "__init__.py")  # __init__ names its API lazily, as text
    assert {p.stem for p in tops} == set(TOP_LEVEL_MAY_IMPORT), "a new top-level module: say what it may import"
    for path in tops:
        for module in imports_of(path):
            there = stage_of(module)
            assert there is None or there in TOP_LEVEL_MAY_IMPORT[path.stem], f"{path.name} imports {module}"


# -- import cycles ------------------------------------------------------------------------------------------------
# Every import counts -- at module level or inside a function -- except those under `if TYPE_CHECKING:`, which never
# run. A lazy import only hides a cycle from the interpreter's start-up; the two modules still hold one concept.

def module_name(path: Path) -> str:
    parts = ("circuitdev", *path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _runtime_imports(tree: ast.AST):
    """The Import / ImportFrom nodes that can run: all but those in the body of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def module_graph() -> dict[str, set[str]]:
    """circuitdev module -> the circuitdev modules it imports. `from package import name` counts the submodule
    `package.name` when it is one, else the package; relative imports are resolved against the importing module."""
    paths = {module_name(p): p for p in LIB.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            for target in targets:
                while target and target not in paths:  # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One readable chain per strongly connected component of more than one module (Tarjan), each a shortest cycle
    through the component's first module: a -> b -> ... -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    chains = []
    for component in sorted(components):
        members, start = set(component), component[0]
        previous = {start: None}
        frontier = [start]
        while frontier and start not in [w for v in frontier for w in graph[v]]:  # breadth first back to start
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w not in previous:
                        previous[w] = v
                        nxt.append(w)
            frontier = nxt
        last = next(v for v in frontier if start in graph[v])
        chain = [last]
        while previous[chain[-1]] is not None:
            chain.append(previous[chain[-1]])
        chain = [start, *reversed(chain[:-1]), start] if len(chain) > 1 else [start, last, start]
        chains.append((chain, component))
    return chains


def test_the_cycle_finder_finds_lazy_relative_and_module_imports_but_not_type_checking(tmp_path, monkeypatch):
    pkg = tmp_path / "circuitdev"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circuitdev.sub import b\n")  # lazy, `from package import module`
    (pkg / "sub" / "b.py").write_text("from ..c import x\n")  # relative
    (pkg / "c.py").write_text("import circuitdev.a\nx = 1\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circuitdev import e\n")
    (pkg / "e.py").write_text("from circuitdev import d\n")
    monkeypatch.setattr(sys.modules[__name__], "LIB", pkg)
    chains = import_cycles(module_graph())
    assert [c for c, _ in chains] == [["circuitdev.a", "circuitdev.sub.b", "circuitdev.c", "circuitdev.a"]]


def test_no_import_cycles():
    chains = import_cycles(module_graph())
    lines = [" -> ".join(m.removeprefix("circuitdev.") for m in chain)
             + (f"   (all of: {', '.join(m.removeprefix('circuitdev.') for m in members)})"
                if len(members) > len(chain) - 1 else "")
             for chain, members in chains]
    assert not lines, "import cycles (lazy imports included):\n" + "\n".join(lines)
