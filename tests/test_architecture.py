"""Structural rules of the code base, checked from the source.

No import cycle among product modules: every import counts, including those inside
functions (which only hide a cycle from the interpreter, not from a reader) and those
under ``TYPE_CHECKING``.
"""
from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
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


# ---------------------------------------------------------------- docs/ARCHITECTURE.md holds

ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
# Where a path the document names relative to a package lives in the repository.
DOC_FOLDERS = ("", "graphrag/", "operators/", "storage/", "prompts/", "graphrag/server/", "graphrag/indexing/",
               "graphrag/querying/", "graphrag/llm/", "graphrag/readers/", "operators/resolution/")


def test_every_file_the_architecture_names_exists() -> None:
    """Each ``path.py`` (or folder/) the document names in backticks is a file or folder of the
    repository, looked for from the root and from each package folder it may be written from."""
    named = set(re.findall(r"`([\w./-]+(?:\.py|\.md|\.txt|/))(?::[^`]*)?`", ARCHITECTURE))
    assert len(named) > 30  # the pattern reads the document
    missing = sorted(n for n in named if not any((ROOT / folder / n).exists() for folder in DOC_FOLDERS))
    assert missing == []


def test_every_module_a_backticked_dotted_name_gives_exists() -> None:
    modules = set(product_modules())
    named = {n for n in re.findall(r"`(graphrag(?:\.\w+)+)`", ARCHITECTURE) if not n.endswith(".py")}
    assert named  # e.g. `graphrag.operators`
    assert sorted(n for n in named if n not in modules and not any(m.startswith(n + ".") for m in modules)) == []


def test_the_layer_rules_the_architecture_states_hold() -> None:
    """An operator never imports a storage backend or the facade; storage never imports an
    operator except the engine's clustering (which the graph contract's default runs)."""
    graph = import_graph()
    backends = {m for m in graph if m.startswith("graphrag.storage.") and m.split(".")[-1] not in
                ("base", "capabilities", "db_common", "files", "lookup_index")}
    for module, imported in graph.items():
        if module.startswith("graphrag.operators."):
            assert not imported & (backends | {"graphrag.graphrag"}), module
        if module.startswith("graphrag.storage."):
            assert {m for m in imported if m.startswith("graphrag.operators.")} <= {"graphrag.operators.clustering"}, \
                module


def test_importing_graphrag_loads_no_heavy_library() -> None:
    """``import graphrag`` and the engine class load no model, client or graph library, as the
    document says: they are imported where first used."""
    code = ("import sys; from graphrag import GraphRAG, QueryParam; import graphrag.cli; "
            "print(sorted(m for m in ('networkx', 'openai', 'torch', 'graspologic', 'sentence_transformers', "
            "'onnxruntime', 'jieba', 'psycopg', 'neo4j', 'pymilvus') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_every_error_is_in_the_one_hierarchy() -> None:
    """Every public exception class a product module defines derives from ``GraphRAGError``."""
    from graphrag.errors import GraphRAGError

    outside = []
    for name, path in product_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and (
                    node.name.endswith("Error") or node.name.endswith("Exception")):
                cls = getattr(importlib.import_module(name), node.name)
                if not issubclass(cls, GraphRAGError):
                    outside.append(f"{name}.{node.name}")
    assert outside == []
