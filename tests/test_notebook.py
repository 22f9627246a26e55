"""examples/explore_cache.ipynb runs headless against a fresh offline index."""
from __future__ import annotations

import re
from pathlib import Path

import networkx as nx

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

from graphrag import GraphRAG, hash_embedding  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "explore_cache.ipynb"
EXAMPLE = ROOT / "examples" / "data" / "saltmarsh_lantern_works.md"


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


def test_explore_notebook_runs_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wd = tmp_path / "wd"
    rag = GraphRAG(working_dir=str(wd), extraction="nlp", embedding_func=hash_embedding(64),
                   chunk_token_size=300, chunk_overlap_token_size=30)
    rag.insert(EXAMPLE.read_text(encoding="utf-8"), sources=[EXAMPLE.name])
    before = _snapshot(wd)

    monkeypatch.setenv("GRAPHRAG_WORKING_DIR", str(wd))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on any failing cell

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert str(wd.resolve()) in text
    assert "ADA PENNICK" in text and "communities per level" in text
    assert any("text/markdown" in o.get("data", {}) for o in outputs)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images and len(images[0]["data"]["image/png"]) > 1000
    pages = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any('id="graph-data"' in "".join(page) and "ADA PENNICK" in "".join(page) for page in pages)
    # The notebook centres its neighbourhood on the entity with the most links (ties by name).
    graph = nx.read_graphml(str(wd / "graph_chunk_entity_relation.graphml"))
    center = min(graph.degree, key=lambda item: (-item[1], item[0]))[0]
    assert re.search(rf"around {re.escape(center)}: [1-9][0-9]* entities, [1-9][0-9]* relations", text)
    assert _snapshot(wd) == before  # nothing written
