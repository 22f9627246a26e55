"""Structural rules of the code base, checked from the source.

No import cycle among product modules: every import counts, including those inside
functions (which only hide a cycle from the interpreter, not from a reader) and those
under ``TYPE_CHECKING``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where each product package's source lives (see pyproject.toml's package-dir).
PACKAGES = {"graphrag": ROOT / "graphrag", "graphrag.operators": ROOT / "operators",
            "graphrag.storage": ROOT / "storage", "graphrag.prompts": ROOT / "prompts"}


def product_modules() -> dict[str, Path]:
    """``{dotted module name: file}`` of every product module."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if name.startswith("graphrag.") and name.split(".")[1] in ("operators", "storage", "prompts") \
                    and package == "graphrag":
                continue  # not there: those packages live outside graphrag/
            modules[name] = path
    return modules


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The product modules ``module`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                out.add(submodule if submodule in known else base)
    return {m for m in out if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {name: _imported(name, path, set(modules)) for name, path in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_import_graph_is_read_from_every_import() -> None:
    graph = import_graph()
    assert "graphrag.indexing.pipeline" in graph["graphrag.graphrag"]
    # An import inside a function counts: the CLI imports the engine only when a command runs.
    assert "graphrag.graphrag" in graph["graphrag.cli_common"]
    assert "graphrag.operators.extraction" in graph["graphrag.indexing.entity_decisions"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]



def test_no_import_cycle_among_product_modules() -> None:
    assert import_cycles(import_graph()) == []


def test_the_cli_reads_the_index_through_graphrag() -> None:
    """The commands read documents, stats and entities through ``GraphRAG`` (its inspection),
    never the stores or the storage layer themselves."""
    graph = import_graph()
    for module in ("graphrag.cli", "graphrag.cli_common", "graphrag.cli_graph"):
        assert not {m for m in graph[module] if m == "graphrag.stores" or m.startswith("graphrag.storage")}, module
        tree = ast.parse(product_modules()[module].read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "stores"], module
