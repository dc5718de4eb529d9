"""No import cycles inside ``codegrep/``: contracts and their wiring are split so imports flow one way.

The graph is computed statically with ``ast``: every ``import``/``from ... import`` anywhere in a module (also
inside functions: a lazy import is still a dependency) except those under ``if TYPE_CHECKING:``.

The root (``codegrep/__init__.py``) is held to more: it sits below every area, so it may not import upwards at all,
``TYPE_CHECKING`` included (``ROOT_LAYER`` lists what it may import).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "codegrep"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def import_graph(package: Path = PACKAGE, type_checking: bool = False) -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (resolved to the most specific existing module);
    ``type_checking=True`` also counts the imports under ``if TYPE_CHECKING:``."""
    files = {module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = set() if type_checking else _type_checking_nodes(tree)
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != mod and target.split(".")[0] == package.name:
                    graph[mod].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted.

    >>> find_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycle_finder_finds_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_lazy_imports_but_not_type_checking(tmp_path):
    pkg = tmp_path / "codegrep"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from codegrep.b import X\n")
    (pkg / "a.py").write_text("def f():\n    from codegrep.sub import c\n")
    (pkg / "b.py").write_text("from . import a\nfrom .sub.c import g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..b import thing\n")
    graph = import_graph(pkg)
    assert graph["codegrep"] == set()
    assert graph["codegrep.a"] == {"codegrep.sub.c"}
    assert graph["codegrep.b"] == {"codegrep.a", "codegrep.sub.c"}
    assert find_cycles(graph) == [["codegrep.a", "codegrep.b", "codegrep.sub.c"]]


def test_no_import_cycles_in_codegrep():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (split contract from wiring):\n" + "\n".join(" <-> ".join(c) for c in cycles)


# What the root package may import (TYPE_CHECKING included): its own helpers and the value types of the two layers
# its protocols are defined over, the task data (Task) and the tool contract (ToolCall, ToolResult). Every area
# above (agent, retrievers, rl, downstream, serve, mining, pipeline, ...) is forbidden.
ROOT_LAYER = ("codegrep.quiet", "codegrep.errors", "codegrep.data", "codegrep.env")


def upward_root_imports(package: Path = PACKAGE) -> set[str]:
    """Modules the root ``__init__`` imports (``TYPE_CHECKING`` included) outside ``ROOT_LAYER``."""
    graph = import_graph(package, type_checking=True)
    return {t for t in graph[package.name] if not any(t == ok or t.startswith(ok + ".") for ok in ROOT_LAYER)}


def test_root_imports_no_upper_layer_not_even_for_typing():
    upward = upward_root_imports()
    assert not upward, ("codegrep/__init__.py imports from a layer above it (describe the value by a root-level "
                        f"Protocol instead): {sorted(upward)}")


def test_upward_root_import_check_sees_type_checking_imports(tmp_path):
    pkg = tmp_path / "codegrep"
    for sub in ("retrievers", "data"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "retrievers" / "base.py").write_text("class Retrieval: ...\n")
    (pkg / "data" / "tasks.py").write_text("class Task: ...\n")
    (pkg / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from codegrep.data.tasks import Task\n"
                                     "    from codegrep.retrievers.base import Retrieval\n")
    assert upward_root_imports(pkg) == {"codegrep.retrievers.base"}


def test_root_result_protocols_match_their_implementations():
    """``Ranking``/``AgentRun`` describe ``Retrieval``/``DownstreamResult`` without importing them: same names, same
    annotations, so a renamed or retyped field fails here."""
    import dataclasses

    import codegrep
    from codegrep.downstream.agents import DownstreamResult
    from codegrep.retrievers.base import Retrieval

    for proto, impl in ((codegrep.Ranking, Retrieval), (codegrep.AgentRun, DownstreamResult)):
        fields = {f.name: f.type for f in dataclasses.fields(impl)}
        for name, annotation in proto.__annotations__.items():
            assert fields.get(name) == annotation, (proto.__name__, impl.__name__, name)
